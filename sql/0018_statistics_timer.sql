-- The statistics timer (tables analyzed as they grow) is periodic work like housekeeping: at most one
-- pending at a time.
drop index timers_single_pending;
create unique index timers_single_pending on timers (kind)
  where status = 'pending' and kind in ('housekeeping', 'statistics');
