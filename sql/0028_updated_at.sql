-- The last change of a call and of a campaign, so a webhook receiver can order the events of one
-- object (deliveries are unordered): set by every statement that changes the row, from the service's
-- clock, and strictly increasing per row (a change in the same millisecond as the previous one takes
-- the next millisecond). Rows written before this migration take their latest known moment.
alter table calls add column updated_at timestamptz;
update calls set updated_at = greatest(created_at, started_at, ended_at, results_reported_at, results_ready_at);
alter table calls alter column updated_at set not null;

alter table campaigns add column updated_at timestamptz;
update campaigns set updated_at = greatest(created_at, started_at, completed_at);
alter table campaigns alter column updated_at set not null;
