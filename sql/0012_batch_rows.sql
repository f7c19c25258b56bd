-- The rows of a statement that writes several requests at once (src/db/coalesce.ts), from a JSON
-- array: one JSON value per row, typed by the caller with json_to_record.
--
-- Why a function, not json_to_recordset in the statement: the planner takes a set-returning function
-- to return 100 rows unless told otherwise, and a prepared statement keeps, after five executions, a
-- generic plan made for that count. Made while the tables were small, it hashed a sequential scan of
-- session_tokens instead of looking 100 rows up by key, and kept doing so as the table grew. Told one
-- row (`rows 1`; a SET clause keeps it from being inlined, which would lose that), the plan looks each
-- row up by key, which stays right for any number of rows and any table size.
create function batch_rows(items json) returns setof json
  language sql immutable strict parallel safe rows 1
  set search_path = pg_catalog
  as $$ select json_array_elements(items) $$;
