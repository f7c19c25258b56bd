-- Knowledge-base documents uploaded with live keys, kept as the chunks an agent retrieves from.
-- Test-mode uploads write nothing here: their document id and chunk count are fictitious.
create table documents (
  id text primary key,
  organization_id text not null references organizations (id),
  knowledge_base_id text not null references knowledge_bases (id),
  title text not null,
  chunk_count integer not null check (chunk_count > 0),
  created_at timestamptz not null
);
create index documents_kb_created on documents (knowledge_base_id, created_at desc, id desc);

create table document_chunks (
  document_id text not null references documents (id) on delete cascade,
  position integer not null,
  content text not null,
  primary key (document_id, position)
);
