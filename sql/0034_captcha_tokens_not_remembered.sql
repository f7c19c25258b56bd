-- A bot-check token is no longer remembered by this service: the verifier itself answers a token it
-- has already verified `success: false` (`timeout-or-duplicate`), and a token passes here exactly when
-- the verifier's answer meets the conditions of the configuration (score, action, hostname).
drop table if exists captcha_tokens_used;
