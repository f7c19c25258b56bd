-- A document is read back whole from its chunks: each chunk keeps what joined it to the one before
-- (a blank line between paragraphs, a space between sentences or words, nothing inside a cut word).
-- Chunks stored before this column existed are taken to start paragraphs.
alter table document_chunks add column separator text not null default E'\n\n';
alter table document_chunks alter column separator drop default;
