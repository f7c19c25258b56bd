-- Web-call session tokens and what starting a web call needs around them: the server secret that
-- derives replayable tokens, idempotency records of minting, per-address rate-limit hits, accepted
-- bot-check tokens, and minute reservations against key caps and plan minutes.

-- Secrets generated once by the server and kept here so every process derives the same values.
create table server_secrets (
  name text primary key,
  secret bytea not null,
  created_at timestamptz not null default now()
);

-- Only the SHA-256 of a session token is stored. `variables` go to the call, never to the browser.
create table session_tokens (
  token_hash bytea primary key,
  organization_id text not null references organizations (id),
  livemode boolean not null,
  secret_key_id text not null references secret_keys (id),
  agent_id text not null references agents (id),
  variables jsonb not null default '{}',
  expires_at timestamptz not null,
  spent_at timestamptz,
  call_id text,
  created_at timestamptz not null
);
create index session_tokens_expires on session_tokens (expires_at);

-- One record per Idempotency-Key, scoped to organization and mode, kept 24 hours. The token itself
-- is not stored: it is derived again from the server secret and `salt` when the request is replayed.
create table session_idempotency_keys (
  organization_id text not null references organizations (id),
  livemode boolean not null,
  idempotency_key text not null,
  request_hash bytea not null,
  salt text not null,
  token_hash bytea not null,
  created_at timestamptz not null,
  primary key (organization_id, livemode, idempotency_key)
);
create index session_idempotency_keys_created on session_idempotency_keys (created_at);

-- Accepted requests per client address, for the rolling-window limit on web calls.
create table rate_limit_hits (
  bucket text not null,
  address text not null,
  hit_at timestamptz not null
);
create index rate_limit_hits_address on rate_limit_hits (bucket, address, hit_at);
create index rate_limit_hits_time on rate_limit_hits (hit_at);

-- Bot-check tokens already accepted once (hashes only), so a token cannot start two calls.
create table captcha_tokens_used (
  token_hash bytea primary key,
  accepted_at timestamptz not null
);
create index captcha_tokens_used_time on captcha_tokens_used (accepted_at);

-- Minutes counted per calendar month (UTC): `plan` rows per organization, `key` rows per publishable
-- key. `used_minutes` includes the reservations of calls still running.
create table minute_usage (
  kind text not null check (kind in ('plan', 'key')),
  subject_id text not null,
  month date not null,
  used_minutes integer not null default 0 check (used_minutes >= 0),
  primary key (kind, subject_id, month)
);

-- One reservation per call (the call id is plain text: reservations do not depend on the calls
-- table). Settling sets kept_minutes once; settling again changes nothing.
create table minute_reservations (
  call_id text primary key,
  organization_id text not null references organizations (id),
  publishable_key_id text references publishable_keys (id),
  plan_charged boolean not null,
  month date not null,
  reserved_minutes integer not null check (reserved_minutes >= 0),
  max_seconds integer not null,
  kept_minutes integer,
  settled_at timestamptz,
  created_at timestamptz not null
);
