-- The language a session token's `language` variable asks for ('en' or 'fr'), decided when it is
-- minted; null means the agent's language at the time of the call. Redeeming a test token then creates
-- its simulated call in the same statement that spends it, without reading the variables back first.
-- Tokens minted before this column existed live five minutes and fall back to the agent's language.
alter table session_tokens add column language text check (language in ('en', 'fr'));
