-- Timers of which at most one may be pending at a time (periodic work such as housekeeping): every
-- process makes sure one exists at start, and this index makes "one" hold across processes.
create unique index timers_single_pending on timers (kind)
  where status = 'pending' and kind in ('housekeeping');
