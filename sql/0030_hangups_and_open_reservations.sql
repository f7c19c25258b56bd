-- A phone call's callee may answer and hang up before the service has written the answer: LiveKit's
-- report of that end then finds the call still ringing. The end is kept here, and the answer, once
-- written, ends the call at once (the earliest report is kept).
alter table calls add column hung_up_while_ringing_at timestamptz;

-- The reservations of calls still running, per organization: a live campaign whose organization has
-- no plan minutes left waits while some are reserved (they come back when those calls end), and
-- stops when none is.
create index minute_reservations_open on minute_reservations (organization_id) where settled_at is null;
