-- Durable timers, calls (simulated and scheduled) and scheduled tasks.

-- Every timer of the service. A row is written in the same transaction as the change that needs it,
-- and deleted in the same transaction as its handler's work, so a timer fires exactly once in effect.
-- `locked_by` is the number of the runner holding the lease (its session advisory lock says whether
-- that runner is alive); `epoch` grows at every claim and fences out a runner whose lease was taken over.
create table timers (
  id bigint generated always as identity primary key,
  kind text not null,
  due_at timestamptz not null,
  payload jsonb not null default '{}',
  status text not null default 'pending' check (status in ('pending', 'failed')),
  attempts integer not null default 0,
  last_error text,
  locked_by integer,
  locked_until timestamptz,
  epoch integer not null default 0,
  created_at timestamptz not null default now()
);
create index timers_due on timers (due_at) where status = 'pending';

create table calls (
  id text primary key,
  organization_id text not null references organizations (id),
  livemode boolean not null,
  status text not null check (
    status in ('scheduled', 'initiated', 'ringing', 'ongoing', 'completed', 'failed', 'no_answer', 'busy', 'cancelled')
  ),
  agent_id text not null references agents (id),
  to_number text,
  contact_id text,
  campaign_id text,
  direction text not null check (direction in ('outbound', 'web')),
  variables jsonb not null default '{}',
  -- Simulated calls: the duration drawn at creation (30–89 s) and the language of the fictitious content.
  simulated_duration_seconds integer,
  language text not null default 'en' check (language in ('en', 'fr')),
  started_at timestamptz,
  ended_at timestamptz,
  duration_seconds integer,
  summary text,
  collected_data jsonb,
  successful boolean,
  outcome text,
  recording_url text,
  transcript jsonb,
  transcript_at timestamptz,
  task_id text,
  created_at timestamptz not null
);
create index calls_org_mode_created on calls (organization_id, livemode, created_at desc, id desc);
create index calls_org_mode_status_created on calls (organization_id, livemode, status, created_at desc, id desc);

-- Scheduled tasks (live mode only): a call to place at `run_at`.
create table tasks (
  id text primary key,
  organization_id text not null references organizations (id),
  type text not null check (type in ('call')),
  call_id text not null references calls (id),
  agent_id text not null references agents (id),
  to_number text not null,
  run_at timestamptz not null,
  status text not null check (status in ('scheduled', 'completed', 'cancelled')),
  timer_id bigint,
  created_at timestamptz not null
);
create index tasks_org_scheduled on tasks (organization_id, run_at, id) where status = 'scheduled';
