-- Server-wide settings that are not rows of a resource: one JSON value per key. First use: `demo`,
-- the ids of the demo organization and agent seeded on the first start with an empty database.
-- `if not exists`: another migration may create the same key/value table for its own settings.
create table if not exists settings (
  key text primary key,
  value jsonb not null
);
