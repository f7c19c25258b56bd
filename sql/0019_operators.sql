-- Operators read back what they created: organizations, and the keys of an organization, in the
-- cursor convention (newest first on (created_at desc, id desc)). The keys' indexes replace the ones
-- on organization_id alone, which they cover.
create index organizations_created on organizations (created_at desc, id desc);
create index secret_keys_org_created on secret_keys (organization_id, created_at desc, id desc);
drop index secret_keys_org;
create index publishable_keys_org_created on publishable_keys (organization_id, created_at desc, id desc);
drop index publishable_keys_org;

-- When each secret key was last used (at most a minute stale: src/auth/keyUsage.ts). A table apart from
-- secret_keys: writing there would wake the key-change trigger of every process (sql/0006), and the
-- keys' rows stay as they were issued. No foreign key: keys are never deleted, and this row is written
-- off the request's path.
create table secret_key_usage (
  key_id text primary key,
  last_used_at timestamptz not null
);

-- Timers kept as `failed` say when they gave up, for the operators' list of work that gave up.
alter table timers add column failed_at timestamptz;
create index timers_failed on timers (created_at desc, id desc) where status = 'failed';

-- The abuse view of a publishable key: one row per key and day (UTC), counted when a web call attempt
-- with the key is refused or started, by one upsert whose row lock serialises parallel attempts of
-- every process (src/db/publishableKeyStats.ts). `refused` maps an error code to its count;
-- `captcha_scores` counts the bot check's scores in 11 buckets (0.0, 0.1 … 1.0); `refused_origins`
-- maps the Origin of refused attempts to its count, at most 100 origins a day (then one entry for
-- the others), so a row stays small whatever a caller sends.
create table publishable_key_daily_stats (
  publishable_key_id text not null,
  day date not null,
  attempts integer not null default 0,
  started integer not null default 0,
  refused jsonb not null default '{}',
  minutes integer not null default 0,
  captcha_scores integer[] not null default '{0,0,0,0,0,0,0,0,0,0,0}',
  refused_origins jsonb not null default '{}',
  last_attempt_at timestamptz not null,
  primary key (publishable_key_id, day)
);
