-- Live campaigns: a call that was not answered (busy, no_answer, failed) is tried again after the
-- campaign's retry delay; a campaign that must wait (outside the call window, over the hourly limit,
-- a retry not due yet) has one timer at the moment it may go on, `wake_at`.
alter table campaigns
  add column retry_delay_seconds integer not null default 300 check (retry_delay_seconds between 0 and 86400),
  add column wake_at timestamptz;

-- A contact pending a retry may be called again from this moment on.
alter table campaign_contacts add column retry_at timestamptz;
