// Migrations are imported as text so the single executable carries them; nothing is read from disk.
// Add a new file to sql/ and one line here. Never edit a migration that has shipped.
import m0001 from "../../../sql/0001_init.sql" with { type: "text" };
import m0002 from "../../../sql/0002_contacts.sql" with { type: "text" };
import m0003 from "../../../sql/0003_timers_calls.sql" with { type: "text" };
import m0004 from "../../../sql/0004_sessions.sql" with { type: "text" };
import m0005 from "../../../sql/0005_demo.sql" with { type: "text" };
import m0006 from "../../../sql/0006_key_changes.sql" with { type: "text" };
import m0007 from "../../../sql/0007_rate_limit_windows.sql" with { type: "text" };
import m0008 from "../../../sql/0008_campaigns.sql" with { type: "text" };
import m0009 from "../../../sql/0009_session_token_language.sql" with { type: "text" };
import m0010 from "../../../sql/0010_documents.sql" with { type: "text" };
import m0011 from "../../../sql/0011_webhook_deliveries.sql" with { type: "text" };
import m0012 from "../../../sql/0012_batch_rows.sql" with { type: "text" };
import m0013 from "../../../sql/0013_single_timers.sql" with { type: "text" };
import m0014 from "../../../sql/0014_agent_settings.sql" with { type: "text" };
import m0015 from "../../../sql/0015_call_results.sql" with { type: "text" };
import m0016 from "../../../sql/0016_document_reads.sql" with { type: "text" };
import m0017 from "../../../sql/0017_knowledge_search.sql" with { type: "text" };
import m0018 from "../../../sql/0018_statistics_timer.sql" with { type: "text" };
import m0019 from "../../../sql/0019_operators.sql" with { type: "text" };
import m0020 from "../../../sql/0020_webhook_modes.sql" with { type: "text" };
import m0021 from "../../../sql/0021_event_retention.sql" with { type: "text" };
import m0022 from "../../../sql/0022_webhook_queues.sql" with { type: "text" };
import m0023 from "../../../sql/0023_carrier_settings.sql" with { type: "text" };
import m0024 from "../../../sql/0024_blocked_numbers.sql" with { type: "text" };
import m0025 from "../../../sql/0025_call_limits.sql" with { type: "text" };
import m0026 from "../../../sql/0026_live_campaigns.sql" with { type: "text" };
import m0027 from "../../../sql/0027_agent_changes.sql" with { type: "text" };
import m0028 from "../../../sql/0028_updated_at.sql" with { type: "text" };
import m0029 from "../../../sql/0029_list_filter_indexes.sql" with { type: "text" };
import m0030 from "../../../sql/0030_hangups_and_open_reservations.sql" with { type: "text" };
import m0031 from "../../../sql/0031_cjk_search.sql" with { type: "text" };
import m0032 from "../../../sql/0032_unused_retention_indexes.sql" with { type: "text" };
import m0033 from "../../../sql/0033_plan_minute_returns.sql" with { type: "text" };
import m0034 from "../../../sql/0034_captcha_tokens_not_remembered.sql" with { type: "text" };
import m0035 from "../../../sql/0035_previous_secrets.sql" with { type: "text" };
import m0036 from "../../../sql/0036_deliveries_dated_with_their_event.sql" with { type: "text" };
import m0037 from "../../../sql/0037_phone_numbers_in_one_spelling.sql" with { type: "text" };
import m0038 from "../../../sql/0038_call_limits_in_progress_bound.sql" with { type: "text" };
import { respellStoredNumbers } from "../numberSpelling.ts";
import type { Db } from "./connection.ts";

/**
 * A migration: its SQL, then, for the few that need what SQL cannot do (the phone library's numbering
 * plans), a step in TypeScript in the same transaction.
 */
export interface Migration {
  name: string;
  sql: string;
  run?: (sql: Db) => Promise<void>;
}

export const migrations: readonly Migration[] = [
  { name: "0001_init", sql: m0001 },
  { name: "0002_contacts", sql: m0002 },
  { name: "0003_timers_calls", sql: m0003 },
  { name: "0004_sessions", sql: m0004 },
  { name: "0005_demo", sql: m0005 },
  { name: "0006_key_changes", sql: m0006 },
  { name: "0007_rate_limit_windows", sql: m0007 },
  { name: "0008_campaigns", sql: m0008 },
  { name: "0009_session_token_language", sql: m0009 },
  { name: "0010_documents", sql: m0010 },
  { name: "0011_webhook_deliveries", sql: m0011 },
  { name: "0012_batch_rows", sql: m0012 },
  { name: "0013_single_timers", sql: m0013 },
  { name: "0014_agent_settings", sql: m0014 },
  { name: "0015_call_results", sql: m0015 },
  { name: "0016_document_reads", sql: m0016 },
  { name: "0017_knowledge_search", sql: m0017 },
  { name: "0018_statistics_timer", sql: m0018 },
  { name: "0019_operators", sql: m0019 },
  { name: "0020_webhook_modes", sql: m0020 },
  { name: "0021_event_retention", sql: m0021 },
  { name: "0022_webhook_queues", sql: m0022 },
  { name: "0023_carrier_settings", sql: m0023 },
  { name: "0024_blocked_numbers", sql: m0024 },
  { name: "0025_call_limits", sql: m0025 },
  { name: "0026_live_campaigns", sql: m0026 },
  { name: "0027_agent_changes", sql: m0027 },
  { name: "0028_updated_at", sql: m0028 },
  { name: "0029_list_filter_indexes", sql: m0029 },
  { name: "0030_hangups_and_open_reservations", sql: m0030 },
  { name: "0031_cjk_search", sql: m0031 },
  { name: "0032_unused_retention_indexes", sql: m0032 },
  { name: "0033_plan_minute_returns", sql: m0033 },
  { name: "0034_captcha_tokens_not_remembered", sql: m0034 },
  { name: "0035_previous_secrets", sql: m0035 },
  { name: "0036_deliveries_dated_with_their_event", sql: m0036 },
  { name: "0037_phone_numbers_in_one_spelling", sql: m0037, run: respellStoredNumbers },
  { name: "0038_call_limits_in_progress_bound", sql: m0038 },
];
