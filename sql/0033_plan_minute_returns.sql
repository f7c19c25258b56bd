-- A call's end gives back the plan minutes it did not use without writing its organization's plan
-- usage row, which every placement of the organization locks: the minutes wait on the settled
-- reservation (plan_return_pending) until the next lock of that row folds them in. Every read of the
-- plan's usage subtracts what is pending, so nothing changes for a reader.
alter table minute_reservations add column plan_return_pending boolean not null default false;
create index minute_reservations_plan_returns on minute_reservations (organization_id, month)
  where plan_return_pending;
