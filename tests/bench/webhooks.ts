/**
 * Webhook delivery and the operators' abuse view, on PostgreSQL, the server in a child process and
 * the receivers in this one:
 * 1. deliveries per second to a local receiver that answers at once, with 1 and with 20 endpoints;
 * 2. the delivery lag of organization B while organization A has a backlog of deliveries to a receiver
 *    that never answers: from B's `POST /api/v1/contacts` (the server writes the event, as it does in
 *    use) to the receiver's receipt of its `contact.created`;
 * 3. the latency of GET /api/admin/v1/publishable-keys/{id}/stats?days=90 for a busy key (90 days of
 *    attempts, 100 refused origins a day).
 * Run: npm run bench:webhooks   (BENCH_EVENTS=2000, BENCH_BACKLOG=3000, BENCH_SECONDS=10 by default)
 */

import type { Server } from "bun";
import type postgres from "postgres";
import { composeDeps } from "../../src/compose.ts";
import { openDatabase } from "../../src/db/engine/connection.ts";
import { countKeyAttempt } from "../../src/db/publishableKeyStats.ts";
import { parseEnv } from "../../src/env.ts";
import { silentLogger } from "../../src/log.ts";
import { createAgent } from "../../src/services/agents.ts";
import { type NewEvent, recordEvents } from "../../src/services/events.ts";
import { createPublishableKey, createSecretKey } from "../../src/services/keys.ts";
import { createOrganization } from "../../src/services/organizations.ts";
import { createWebhookEndpoint } from "../../src/services/webhookEndpoints.ts";
import { freshPostgres, machine, percentile, startServer } from "./lib.ts";

const EVENTS = Number(process.env.BENCH_EVENTS ?? 2000);
const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 3000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const ADMIN_TOKEN = "bench-admin-token-0123456789abcdefghijklmnop";

/** Receivers: `/ok…` answers 200 at once, `/hang…` never; arrival times by event id and path. */
function startReceiver() {
  const arrivals = new Map<string, number>();
  let received = 0;
  const server: Server<undefined> = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const path = new URL(req.url).pathname;
      received++;
      const at = performance.now();
      arrivals.set(`${path} ${req.headers.get("webhook-id")}`, at);
      // B's deliveries are matched to the contact whose creation caused them.
      if (path === "/ok-b") {
        return req.json().then((event: { data: { id: string } }) => {
          arrivals.set(`${path} ${event.data.id}`, at);
          return new Response(null, { status: 200 });
        });
      }
      if (path.startsWith("/hang")) return new Promise<Response>(() => {});
      return new Response(null, { status: 200 });
    },
  });
  return {
    url: (path: string) => `http://127.0.0.1:${server.port}${path}`,
    arrivals,
    received: () => received,
    stop: () => server.stop(true),
  };
}

const receiver = startReceiver();
const pg = await freshPostgres("vs_bench_webhooks");
const db = await openDatabase({ url: pg.url, dataDir: "", log: silentLogger, max: 4 });
const deps = composeDeps({
  sql: db.sql,
  env: parseEnv({ WEBHOOK_ALLOW_PRIVATE_URLS: "true" }),
  log: silentLogger,
});

async function organizationWithEndpoints(name: string, paths: string[]) {
  const org = await createOrganization(deps, { name, paidPlan: true, planMinutes: 1000 });
  for (const path of paths) {
    await createWebhookEndpoint(
      deps,
      { organizationId: org.id, livemode: true },
      { url: receiver.url(path), events: ["contact.created"] },
    );
  }
  return org.id;
}

const events = (organizationId: string, n: number): NewEvent[] =>
  Array.from({ length: n }, (_, i) => ({
    organizationId,
    agentId: null,
    type: "contact.created",
    livemode: true,
    data: { id: `ct_${i}` },
  }));

async function writeEvents(sql: postgres.Sql, list: NewEvent[]): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < list.length; i += 500)
    ids.push(...(await recordEvents(sql, deps, list.slice(i, i + 500))));
  return ids;
}

async function delivered(organizationId: string): Promise<number> {
  const [row] = await db.sql<{ n: number }[]>`
    select count(*)::int as n from webhook_deliveries d join events e on e.id = d.event_id
    where e.organization_id = ${organizationId} and d.status = 'delivered'`;
  return row!.n;
}

console.log(`Webhooks on PostgreSQL, ${machine()}`);
const server = await startServer({
  DATABASE_URL: pg.url,
  WEBHOOK_ALLOW_PRIVATE_URLS: "true",
  ADMIN_TOKEN,
});
try {
  // 1. Throughput with 1 and with 20 endpoints.
  console.log("\n| endpoints | events | deliveries | seconds | deliveries/s |");
  console.log("|---|---|---|---|---|");
  for (const endpoints of [1, 20]) {
    const paths = Array.from({ length: endpoints }, (_, i) => `/ok-${endpoints}-${i}`);
    const org = await organizationWithEndpoints(`Throughput ${endpoints}`, paths);
    const n = Math.max(1, Math.round(EVENTS / endpoints));
    const total = n * endpoints;
    const begun = performance.now();
    await writeEvents(db.sql, events(org, n));
    while ((await delivered(org)) < total) {
      if (performance.now() - begun > 300_000) throw new Error("deliveries did not finish in 5 minutes");
      await Bun.sleep(100);
    }
    const seconds = (performance.now() - begun) / 1000;
    console.log(
      `| ${endpoints} | ${n} | ${total} | ${seconds.toFixed(1)} | ${Math.round(total / seconds)} |`,
    );
  }

  // 2. B's lag while A's receiver hangs with a backlog.
  const a = await organizationWithEndpoints("Dead receiver", ["/hang-a"]);
  const b = await organizationWithEndpoints("Healthy receiver", ["/ok-b"]);
  const bKey = (await createSecretKey(deps, b, { mode: "live", scopes: ["*"] })).key;
  await writeEvents(db.sql, events(a, BACKLOG));
  // Let A's backlog be looked at once (queued, deferred), as it is in a steady state.
  await Bun.sleep(3_000);
  const lags: number[] = [];
  const sentAt = new Map<string, number>();
  const until = performance.now() + SECONDS * 1000;
  for (let i = 0; performance.now() < until; i++) {
    const sent = performance.now();
    const res = await fetch(`${server.url}/api/v1/contacts`, {
      method: "POST",
      headers: { authorization: `Bearer ${bKey}`, "content-type": "application/json" },
      body: JSON.stringify({ phone: `+336${String(10_000_000 + i).slice(-8)}` }),
    });
    if (res.status !== 201) throw new Error(`contact: ${res.status} ${await res.text()}`);
    sentAt.set(((await res.json()) as { id: string }).id, sent);
    await Bun.sleep(50);
  }
  const waitEnd = performance.now() + 15_000;
  while (
    performance.now() < waitEnd &&
    [...sentAt.keys()].some((id) => !receiver.arrivals.has(`/ok-b ${id}`))
  ) {
    await Bun.sleep(50);
  }
  let lost = 0;
  for (const [id, sent] of sentAt) {
    const got = receiver.arrivals.get(`/ok-b ${id}`);
    if (got === undefined) lost++;
    else lags.push(got - sent);
  }
  lags.sort((x, y) => x - y);
  const [pending] = await db.sql<{ n: number; attempts: number }[]>`
    select count(*) filter (where d.status = 'pending')::int as n, sum(d.attempts)::int as attempts
    from webhook_deliveries d join events e on e.id = d.event_id where e.organization_id = ${a}`;
  console.log(
    `\nB's delivery lag while A (${pending!.n} deliveries pending, ${pending!.attempts} attempts counted) hangs:`,
  );
  console.log("| B events | p50 ms | p99 ms | max ms | not arrived within 15 s |");
  console.log("|---|---|---|---|---|");
  console.log(
    `| ${sentAt.size} | ${percentile(lags, 50).toFixed(1)} | ${percentile(lags, 99).toFixed(1)} | ${(lags.at(-1) ?? Number.NaN).toFixed(1)} | ${lost} |`,
  );

  // 3. The abuse view of a busy key over 90 days.
  const org = await createOrganization(deps, { name: "Busy key", paidPlan: true, planMinutes: 1000 });
  const agent = await createAgent(deps, org.id, { name: "Agent" });
  const key = await createPublishableKey(deps, org.id, {
    agentId: agent.id,
    allowedOrigins: ["https://shop.example.com"],
    monthlyMinuteCap: 100,
  });
  const today = Date.parse(new Date().toISOString().slice(0, 10));
  const codes = ["origin_not_allowed", "invalid_captcha", "rate_limited", "minute_cap_reached"];
  for (let day = 0; day < 90; day++) {
    const at = new Date(today - day * 86_400_000 + 3_600_000);
    const writes: Promise<unknown>[] = [];
    for (let i = 0; i < 200; i++) {
      writes.push(
        countKeyAttempt(
          db.sql,
          { id: key.id },
          {
            at,
            outcome:
              i % 10 === 0
                ? { started: true, minutes: 3 }
                : { refused: codes[i % codes.length]!, origin: `https://o${i % 120}.example.net` },
            captchaScore: (i % 11) / 10,
          },
        ),
      );
    }
    await Promise.all(writes);
  }
  const statsUrl = `${server.url}/api/admin/v1/publishable-keys/${key.id}/stats?days=90`;
  const headers = { authorization: `Bearer ${ADMIN_TOKEN}` };
  for (let i = 0; i < 20; i++) await (await fetch(statsUrl, { headers })).arrayBuffer(); // warm-up
  const times: number[] = [];
  for (let i = 0; i < 200; i++) {
    const begun = performance.now();
    const res = await fetch(statsUrl, { headers });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`stats answered ${res.status}`);
    times.push(performance.now() - begun);
  }
  times.sort((x, y) => x - y);
  console.log("\nGET /publishable-keys/{id}/stats?days=90, a key with 200 attempts and 100+ origins a day:");
  console.log("| requests | p50 ms | p99 ms |");
  console.log("|---|---|---|");
  console.log(
    `| ${times.length} | ${percentile(times, 50).toFixed(2)} | ${percentile(times, 99).toFixed(2)} |`,
  );
} finally {
  await server.stop();
  await db.close();
  receiver.stop();
  await pg.drop();
}
