-- The retention pass walks events by id and reaches their deliveries by event (src/db/events.ts,
-- deleteEventsBefore): the indexes on created_at alone that sql/0021 made for it serve no statement, and
-- every event and every delivery paid for them.
drop index if exists events_created;
drop index if exists webhook_deliveries_created;
