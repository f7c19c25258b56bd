-- Contacts, webhook endpoints, and the indexes that keep every cursor list a keyset scan:
-- each list reads `where <scope> and (created_at, id) < (cursor) order by created_at desc, id desc`,
-- so each scope (organization, mode, filter) has an index ending in (created_at desc, id desc).

-- Contacts are real data of the organization in both modes, hence no livemode column.
-- A deleted contact is removed (hard delete): its id is then unknown to reads and to cursors.
create table contacts (
  id text primary key,
  organization_id text not null references organizations (id),
  phone text not null,
  name text,
  email text,
  metadata jsonb not null default '{}'::jsonb,
  created_at timestamptz not null,
  updated_at timestamptz not null
);
create index contacts_org_created on contacts (organization_id, created_at desc, id desc);
create index contacts_org_phone_created on contacts (organization_id, phone, created_at desc, id desc);
create index contacts_org_email_created on contacts (organization_id, lower(email), created_at desc, id desc);

-- Event list filtered by type (GET /v1/events?type=…) within one organization and mode.
create index events_org_mode_type_created on events (organization_id, livemode, type, created_at desc, id desc);

-- Webhook endpoints belong to the organization and receive events of both modes (receivers filter on
-- livemode). `events` null means every event type, including types added later. The signing secret
-- is kept as issued because signing needs it; it is shown once at creation and never listed.
create table webhook_endpoints (
  id text primary key,
  organization_id text not null references organizations (id),
  url text not null,
  events text[],
  secret text not null,
  created_at timestamptz not null
);
create index webhook_endpoints_org_created on webhook_endpoints (organization_id, created_at desc, id desc);
