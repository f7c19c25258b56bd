-- The results a live call's voice agent reports (transcript, summary, collected data, outcome,
-- recording): when they arrived, and when their events (`call.transcript_ready`,
-- `call.analysis_ready`) were recorded, which happens once both the call has ended and the results
-- exist, whichever comes last.
alter table calls
  add column results_reported_at timestamptz,
  add column results_ready_at timestamptz;
