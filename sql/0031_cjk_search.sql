-- Chinese, Japanese and Korean are written without spaces between words, so the text search parser
-- takes a whole clause for one word ('说明退货政策' never matched '退货'). search_text() rewrites each
-- run of their characters (Han, kana, Hangul) as its overlapping pairs of characters:
-- '说明退货政策' → '说明 明退 退货 货政 政策'; a character alone stays as it is, and so does all other
-- text. Chunks are indexed and queries parsed through it (src/db/documents.ts, src/db/knowledgeBases.ts),
-- so a query finds a chunk by any pair of characters they share, whatever the configuration.
create function search_text(t text) returns text
language plpgsql immutable strict parallel safe as $$
declare
  -- Hangul Jamo, CJK radicals, 々〆〇, hiragana, katakana (but its middle dot ・, a separator), Hangul
  -- compatibility jamo, katakana extensions, CJK ideographs (extension A, unified, compatibility),
  -- Hangul Jamo extension A and syllables, halfwidth katakana, and the ideographs beyond the BMP.
  cjk constant text := '\u1100-\u11ff\u2e80-\u2fdf\u3005-\u3007\u3041-\u309f\u30a0-\u30fa\u30fc-\u30ff'
    '\u3131-\u318e\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff'
    '\uff66-\uff9f\U00020000-\U0003134f';
begin
  if t !~ ('[' || cjk || ']') then
    return t;
  end if;
  -- The text in runs: m.r[1] a run of two or more such characters, m.r[2] anything else.
  return (
    select string_agg(
      case when m.r[1] is null then m.r[2] else (
        select string_agg(substr(m.r[1], i, 2), ' ' order by i)
        from generate_series(1, length(m.r[1]) - 1) as i
      ) end,
      ' ' order by m.n)
    from regexp_matches(t, '([' || cjk || ']{2,})|([^' || cjk || ']+|[' || cjk || '])', 'g')
      with ordinality as m(r, n)
  );
end
$$;

-- The chunks indexed before hold such runs as single words: indexed again.
update document_chunks c set search_vector = to_tsvector(k.search_config::regconfig, search_text(c.content))
from documents d join knowledge_bases k on k.id = d.knowledge_base_id
where d.id = c.document_id and search_text(c.content) <> c.content;
