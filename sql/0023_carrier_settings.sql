-- Carrier settings of an organization for live phone calls: its outbound SIP trunk and caller number
-- (null: the environment's defaults), the countries it may call (null: every country), its call window
-- (null: any time) and its limits. The call window is `{start, end, timeZone, days}` as the API shows it.
alter table organizations
  add column sip_trunk_id text,
  add column caller_number text,
  add column allowed_countries text[],
  add column call_window jsonb,
  add column max_concurrent_calls integer not null default 10
    check (max_concurrent_calls between 1 and 1000),
  add column max_calls_per_hour integer not null default 100
    check (max_calls_per_hour between 1 and 100000);
