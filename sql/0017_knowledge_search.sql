-- Full-text search over the chunks of a knowledge base. Each knowledge base has a language (a BCP 47
-- tag, optional) and, derived from it, the text search configuration that indexes its chunks and
-- parses the queries made to it: `french` for French, `english` for English, `simple` (no stemming,
-- no stop words) for every other language or none. Both databases ship these three.
alter table knowledge_bases
  add column language text,
  add column search_config text not null generated always as (
    case
      when lower(language) = 'fr' or lower(language) like 'fr-%' then 'french'
      when lower(language) = 'en' or lower(language) like 'en-%' then 'english'
      else 'simple'
    end
  ) stored;

alter table document_chunks add column search_vector tsvector;
-- Kept in the row (compressed) rather than moved out to the TOAST table, where a chunk's vector of
-- 1–2 kB would otherwise go: ranking reads the vector of every matching chunk, and fetching each from
-- TOAST made a search over 10,000 chunks several times slower.
alter table document_chunks alter column search_vector set storage main;
update document_chunks c set search_vector = to_tsvector(k.search_config::regconfig, c.content)
from documents d join knowledge_bases k on k.id = d.knowledge_base_id
where d.id = c.document_id;
alter table document_chunks alter column search_vector set not null;
create index document_chunks_search on document_chunks using gin (search_vector);
