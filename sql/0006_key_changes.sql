-- Tells every process that a secret key or an organization changed, so in-memory key caches evict it
-- (src/auth/keyCache.ts). The notification is sent at commit, so no process sees it before the change.

create function notify_key_change() returns trigger language plpgsql as $$
begin
  if tg_table_name = 'secret_keys' then
    perform pg_notify('key_changes', json_build_object('keyId', old.id)::text);
  else
    perform pg_notify('key_changes', json_build_object('organizationId', old.id)::text);
  end if;
  return null;
end
$$;

create trigger secret_keys_changed after update or delete on secret_keys
  for each row execute function notify_key_change();
create trigger organizations_changed after update or delete on organizations
  for each row execute function notify_key_change();
