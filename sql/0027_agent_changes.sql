-- Tells every process that an organization's agents changed, so in-memory agent lists evict it
-- (src/caches.ts). The notification is sent at commit, so no process sees it before the change.
create function notify_agent_change() returns trigger language plpgsql as $$
begin
  perform pg_notify('agent_changes',
    json_build_object('organizationId', coalesce(new.organization_id, old.organization_id))::text);
  return null;
end
$$;

create trigger agents_changed after insert or update or delete on agents
  for each row execute function notify_agent_change();
