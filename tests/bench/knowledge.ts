/**
 * What the voice agent asks of the service, measured: knowledge search latency over 10,000 chunks,
 * and the throughput of call results reports (each writing the results and their two events).
 *
 *   npm run bench:knowledge                                   both databases
 *   npm run bench:knowledge -- --db postgres                  one of them
 *   BENCH_CHUNKS=2000 BENCH_SEARCHES=100 BENCH_REPORTS=300 npm run bench:knowledge   a quick check
 *
 * Through the real app in this process (`app.request`, no TCP), on a fresh database each (PostgreSQL
 * at TEST_PG_URL, created and dropped; or an embedded one in a temporary folder). Search: documents
 * uploaded through the API into an English knowledge base (up to 1,000 characters per chunk, words
 * drawn as prose uses them, see `vocabulary`), then questions of 4 to 10 words, one at a time,
 * timed from request to parsed answer; EXPLAIN (ANALYZE) of the search statement is printed. Reports:
 * live web calls that have ended, inserted in bulk, then `POST /v1/calls/{id}/results` with a
 * 20-segment transcript from `BENCH_CONCURRENCY` concurrent clients; the events are counted at the end.
 */
import { parseArgs } from "node:util";
import { createApp } from "../../src/app.ts";
import { systemClock } from "../../src/clock.ts";
import { composeDeps } from "../../src/compose.ts";
import { parseSearchQuery, searchChunks } from "../../src/db/knowledgeBases.ts";
import { parseEnv } from "../../src/env.ts";
import { silentLogger } from "../../src/log.ts";
import { createKnowledgeBase } from "../../src/services/knowledgeBases.ts";
import { seedOrganization } from "../helpers/app.ts";
import { createTestDatabase } from "../helpers/db.ts";
import { machine, percentile } from "./lib.ts";

const CHUNKS = Number(process.env.BENCH_CHUNKS ?? 10_000);
const SEARCHES = Number(process.env.BENCH_SEARCHES ?? 1_000);
const WARMUP = 100;
const REPORTS = Number(process.env.BENCH_REPORTS ?? 3_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const CHUNKS_PER_DOCUMENT = 10;

const { values: args } = parseArgs({ options: { db: { type: "string", default: "both" } } });
const kinds = args.db === "both" ? (["postgres", "embedded"] as const) : ([args.db] as const);

/** A deterministic generator, so that both databases get the same text and the same queries. */
function random(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Words as prose uses them: frequencies follow Zipf's law (the word of rank r is used in proportion to
 * 1/r) over 20,000 words, the most frequent being English stop words (which the `english`
 * configuration drops, as it would from real text), the rest made-up words standing for the content
 * words of a shop, a practice or a help desk.
 */
const STOP_WORDS = (
  "the of and to a in is it you that he was for on are with as his they be at one have this from or had by " +
  "but some what there we can out other were all your when up use how said an each she which do their if " +
  "will about many then them would so these her has more could no my than been who its now did get may " +
  "into over only our just also very after most should where those any why while both such"
).split(" ");

function vocabulary(rand: () => number): { draw: () => string } {
  const syllables = [
    "ka",
    "lo",
    "mi",
    "ter",
    "van",
    "shu",
    "pre",
    "dor",
    "ne",
    "sta",
    "qui",
    "bel",
    "ro",
    "fin",
    "ga",
  ];
  const words = [...STOP_WORDS];
  while (words.length < 20_000) {
    const n = 2 + Math.floor(rand() * 3);
    words.push(Array.from({ length: n }, () => syllables[Math.floor(rand() * syllables.length)]).join(""));
  }
  const cumulative: number[] = [];
  let total = 0;
  for (let r = 1; r <= words.length; r++) {
    total += 1 / r;
    cumulative.push(total);
  }
  return {
    draw: () => {
      const x = rand() * total;
      let lo = 0;
      let hi = cumulative.length - 1;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (cumulative[mid]! < x) lo = mid + 1;
        else hi = mid;
      }
      return words[lo]!;
    },
  };
}

function paragraph(draw: () => string, rand: () => number): string {
  const sentences: string[] = [];
  let length = 0;
  // Up to 1,000 characters: one paragraph per chunk.
  for (;;) {
    const n = 6 + Math.floor(rand() * 12);
    const s = `${Array.from({ length: n }, draw).join(" ")}.`;
    if (length + s.length + 1 > 1000) break;
    sentences.push(s[0]!.toUpperCase() + s.slice(1));
    length += s.length + 1;
  }
  return sentences.join(" ");
}

const fmt = (ms: number) => `${ms.toFixed(2)} ms`;

async function bench(kind: "postgres" | "embedded") {
  const db = await createTestDatabase(kind);
  const deps = composeDeps({ sql: db.sql, env: parseEnv({}), log: silentLogger, clock: systemClock });
  const app = createApp(deps);
  const request = (path: string, init: RequestInit & { key: string; json?: unknown }) => {
    const headers = new Headers({ authorization: `Bearer ${init.key}` });
    if (init.json !== undefined) headers.set("content-type", "application/json");
    return app.fetch(
      new Request(`http://localhost${path}`, {
        method: init.method ?? "GET",
        headers,
        ...(init.json !== undefined ? { body: JSON.stringify(init.json) } : {}),
      }),
      { remoteAddress: "127.0.0.1" },
    );
  };
  try {
    const seed = await seedOrganization({ deps });
    const kb = await createKnowledgeBase(deps, seed.org.id, { name: "Bench", language: "en" });
    console.log(`\n=== ${kind}`);

    // ——— search ———
    const rand = random(42);
    const { draw } = vocabulary(rand);
    const documents = Math.ceil(CHUNKS / CHUNKS_PER_DOCUMENT);
    let t0 = performance.now();
    for (let d = 0; d < documents; d++) {
      const text = Array.from({ length: CHUNKS_PER_DOCUMENT }, () => paragraph(draw, rand)).join("\n\n");
      const res = await request(`/api/v1/knowledge-bases/${kb.id}/documents`, {
        method: "POST",
        key: seed.liveKey,
        json: { title: `Document ${d}`, text },
      });
      if (res.status !== 201) throw new Error(`upload: ${res.status} ${await res.text()}`);
    }
    const [count] = await db.sql<{ n: number }[]>`select count(*)::int as n from document_chunks`;
    await db.sql`analyze document_chunks`;
    await db.sql`analyze documents`;
    console.log(
      `seeded ${count!.n.toLocaleString("en")} chunks in ${documents} documents in ` +
        `${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );

    const queries = Array.from({ length: WARMUP + SEARCHES }, () =>
      Array.from({ length: 4 + Math.floor(rand() * 7) }, draw).join(" "),
    );
    const times: number[] = [];
    let found = 0;
    for (const [i, q] of queries.entries()) {
      const start = performance.now();
      const res = await request(
        `/api/v1/knowledge-bases/${kb.id}/search?q=${encodeURIComponent(q)}&limit=5`,
        {
          key: seed.liveKey,
        },
      );
      const body = (await res.json()) as { results: unknown[] };
      const ms = performance.now() - start;
      if (res.status !== 200) throw new Error(`search: ${res.status} ${JSON.stringify(body)}`);
      if (i >= WARMUP) {
        times.push(ms);
        found += body.results.length;
      }
    }
    times.sort((a, b) => a - b);
    console.log(
      `search over ${count!.n.toLocaleString("en")} chunks: p50 ${fmt(percentile(times, 50))}, ` +
        `p99 ${fmt(percentile(times, 99))}, max ${fmt(times.at(-1)!)} (${SEARCHES} questions of 4–10 words, ` +
        `limit 5, ${(found / SEARCHES).toFixed(1)} results on average; target p99 < ${kind === "postgres" ? 20 : 50} ms)`,
    );
    const sample = queries[WARMUP]!;
    const parsed = await parseSearchQuery(db.sql, seed.org.id, kb.id, sample);
    const plan = await db.sql<{ "QUERY PLAN": string }[]>`
      explain (analyze, costs off) ${searchChunks(db.sql, kb.id, parsed!.query, 5) as never}`;
    console.log(`  EXPLAIN for "${sample}":\n${plan.map((r) => `    ${r["QUERY PLAN"]}`).join("\n")}`);

    // ——— results reports ———
    const ids = Array.from({ length: REPORTS }, () => deps.ids.next("call"));
    await db.sql`
      insert into calls (id, organization_id, livemode, status, agent_id, direction, created_at, started_at,
                         ended_at, duration_seconds, updated_at)
      select id, ${seed.org.id}, true, 'completed', ${seed.agent.id}, 'web', now() - interval '3 minutes',
             now() - interval '2 minutes', now() - interval '1 minute', 60, now() - interval '1 minute'
      from unnest(${ids}::text[]) as id`;
    const transcript = Array.from({ length: 20 }, (_, i) => ({
      speaker: i % 2 ? "contact" : "agent",
      text: paragraph(draw, rand).slice(0, 200),
      offsetSeconds: i * 3,
    }));
    const body = {
      transcript,
      summary: "The caller asked about opening hours and booked a visit.",
      collectedData: { visit: "2026-11-27T10:00", adults: 2 },
      successful: true,
      outcome: "visit_booked",
      recordingUrl: "https://recordings.example.com/bench.ogg",
    };
    const [before] = await db.sql<{ n: number }[]>`select count(*)::int as n from events`;
    let next = 0;
    const latencies: number[] = [];
    t0 = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        for (let i = next++; i < ids.length; i = next++) {
          const start = performance.now();
          const res = await request(`/api/v1/calls/${ids[i]}/results`, {
            method: "POST",
            key: seed.liveKey,
            json: body,
          });
          await res.arrayBuffer();
          latencies.push(performance.now() - start);
          if (res.status !== 200) throw new Error(`report: ${res.status}`);
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    const [after] = await db.sql<{ n: number }[]>`select count(*)::int as n from events`;
    latencies.sort((a, b) => a - b);
    console.log(
      `results reports: ${Math.round(REPORTS / seconds).toLocaleString("en")}/s over ${REPORTS.toLocaleString("en")} ` +
        `reports (${CONCURRENCY} concurrent clients; p50 ${fmt(percentile(latencies, 50))}, ` +
        `p99 ${fmt(percentile(latencies, 99))}); events written: ${(after!.n - before!.n).toLocaleString("en")} ` +
        `(2 per report: call.transcript_ready, call.analysis_ready)`,
    );
  } finally {
    await db.close();
  }
}

console.log(`bench:knowledge on ${machine()}`);
for (const kind of kinds) {
  if (kind !== "postgres" && kind !== "embedded") throw new Error(`--db must be postgres, embedded or both`);
  await bench(kind);
}
