-- An upper bound of the organization's live phone calls in progress, kept on its limits row by every
-- placement (which holds the row's lock): the calls it placed are added, calls that end are not taken
-- off (an end never writes this row, which every placement locks). While the bound leaves room for a
-- batch under maxConcurrentCalls, the batch is admitted on it and the calls in progress are not
-- counted; when it does not, they are counted and the count becomes the bound. Null: not known yet.
alter table call_limits add column in_progress_bound integer check (in_progress_bound >= 0);
