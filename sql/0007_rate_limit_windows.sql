-- Rate limits as one row per (bucket, address) holding the hits of the window, so a decision is one
-- statement (the row lock of the upsert serialises an address) instead of a locked transaction of
-- several round trips. The hits are transient: the old per-hit table is dropped, not migrated.

drop table rate_limit_hits;

create table rate_limit_windows (
  bucket text not null,
  address text not null,
  -- Times of the counted hits still in the window, oldest first.
  hits timestamptz[] not null,
  -- Whether the latest request was allowed: what the statement that wrote the row decided.
  last_allowed boolean not null,
  primary key (bucket, address)
);
