// Migrations are imported as text so the single executable carries them; nothing is read from disk.
// Add a new file to sql/ and one line here. Never edit a migration that has shipped.
import m0001 from "../../sql/0001_init.sql" with { type: "text" };
import m0003 from "../../sql/0003_timers_calls.sql" with { type: "text" };

export const migrations: readonly { name: string; sql: string }[] = [
  { name: "0001_init", sql: m0001 },
  { name: "0003_timers_calls", sql: m0003 },
];
