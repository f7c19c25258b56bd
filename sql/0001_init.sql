-- Tenancy: organizations, agents, keys, knowledge bases; and the events outbox every resource writes to.

create table organizations (
  id text primary key,
  name text not null,
  paid_plan boolean not null default false,
  plan_minutes integer not null default 0 check (plan_minutes >= 0),
  created_at timestamptz not null
);

create table agents (
  id text primary key,
  organization_id text not null references organizations (id),
  name text not null,
  active boolean not null default true,
  livekit_agent_name text,
  language text not null default 'en' check (language in ('en', 'fr')),
  created_at timestamptz not null
);
create index agents_org_created on agents (organization_id, created_at desc, id desc);

-- Secret keys: only the SHA-256 of the key is stored; `start` is a short visible prefix for operators.
create table secret_keys (
  id text primary key,
  organization_id text not null references organizations (id),
  mode text not null check (mode in ('live', 'test')),
  key_hash bytea not null unique,
  start text not null,
  scopes text[] not null,
  agent_ids text[],
  revoked_at timestamptz,
  created_at timestamptz not null
);
create index secret_keys_org on secret_keys (organization_id);

create table publishable_keys (
  id text primary key,
  organization_id text not null references organizations (id),
  agent_id text not null references agents (id),
  key_hash bytea not null unique,
  start text not null,
  allowed_origins text[] not null,
  monthly_minute_cap integer not null check (monthly_minute_cap >= 1),
  revoked_at timestamptz,
  created_at timestamptz not null
);
create index publishable_keys_org on publishable_keys (organization_id);

create table knowledge_bases (
  id text primary key,
  organization_id text not null references organizations (id),
  name text not null,
  created_at timestamptz not null
);
create index knowledge_bases_org on knowledge_bases (organization_id);

-- The outbox of events (GET /v1/events and webhooks). Delivery to webhook endpoints reads from here.
create table events (
  id text primary key,
  organization_id text not null references organizations (id),
  type text not null,
  livemode boolean not null,
  data jsonb not null,
  created_at timestamptz not null
);
create index events_org_mode_created on events (organization_id, livemode, created_at desc, id desc);
