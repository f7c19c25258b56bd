-- The do-not-call list: numbers an organization's live phone calls never reach. Entries have the mode
-- of the key that wrote them; only live entries are consulted (test calls apply no calling rule). A
-- number is listed at most once per organization and mode, which makes creating an entry idempotent.
create table blocked_numbers (
  id text primary key,
  organization_id text not null references organizations (id),
  livemode boolean not null,
  phone text not null,
  reason text,
  created_at timestamptz not null
);
create unique index blocked_numbers_phone on blocked_numbers (organization_id, livemode, phone);
create index blocked_numbers_org_mode_created
  on blocked_numbers (organization_id, livemode, created_at desc, id desc);
