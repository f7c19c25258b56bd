-- What the dispatched voice agent reads at the start of a call: its language as any BCP 47 tag (the
-- application canonicalises it), its instructions, its greeting and the knowledge bases it searches.
alter table agents drop constraint agents_language_check;
alter table agents
  add column instructions text check (char_length(instructions) <= 20000),
  add column greeting text check (char_length(greeting) <= 1000),
  add column knowledge_base_ids text[] not null default '{}';

-- Simulated calls only have English and French content: French for `fr` and its regional variants
-- (`fr-CA`), English for every other language. Derived here so that statements creating calls from
-- an agent (a session token's claim) and the application read the same answer.
alter table agents add column content_language text not null
  generated always as (case when lower(language) = 'fr' or lower(language) like 'fr-%' then 'fr' else 'en' end) stored;
