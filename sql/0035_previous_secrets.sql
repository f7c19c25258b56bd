-- After a secret rotation every secret replaced in the last 24 hours keeps signing beside the new one
-- (a second rotation within the day no longer cuts the first one's day short): a list of
-- {secret, expiresAt}, newest first, instead of a single previous secret.
alter table webhook_endpoints add column previous_secrets jsonb not null default '[]'::jsonb;
update webhook_endpoints
set previous_secrets = jsonb_build_array(jsonb_build_object('secret', previous_secret, 'expiresAt', previous_secret_expires_at))
where previous_secret is not null and previous_secret_expires_at > now();
alter table webhook_endpoints drop column previous_secret, drop column previous_secret_expires_at;
