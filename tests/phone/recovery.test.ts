import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { updateOrganization } from "../../src/services/organizations.ts";
import { pool, type ServerProcess, startServer } from "../calls/process.ts";
import { depsFor, seedOrganization } from "../helpers/app.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/db.ts";
import { type FakeLiveKit, startFakeLiveKit } from "../helpers/fakeLivekit.ts";
import { waitUntil } from "../helpers/wait.ts";
import { freshNumber, TRUNK } from "./support.ts";

/**
 * `kill -9` with live phone calls ringing, then a restart on the same database: every call is
 * resolved from LiveKit's rooms (answered → ongoing; still ringing → its room deleted, failed
 * interrupted), nobody is dialled twice, and a task due meanwhile fires after the restart.
 * Real server processes on PostgreSQL, the fake LiveKit in this process.
 */

let db: TestDatabase;
let liveKit: FakeLiveKit;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
const children: ServerProcess[] = [];
const env = () => ({ DATABASE_URL: db.url!, ...liveKit.env, LIVEKIT_SIP_TRUNK_ID: TRUNK });

beforeAll(async () => {
  db = await createTestDatabase("postgres");
  liveKit = await startFakeLiveKit();
  const deps = depsFor(db.sql);
  seed = await seedOrganization({ deps }, { paidPlan: true, planMinutes: 100_000 });
  await updateOrganization(deps, seed.org.id, { maxConcurrentCalls: 1000, maxCallsPerHour: 1000 });
});
afterAll(async () => {
  for (const c of children) c.proc.kill(9);
  await liveKit.close();
  await db.close();
});

async function statuses(ids: string[]) {
  const rows = await db.sql<{ id: string; status: string; outcome: string | null }[]>`
    select id, status, outcome from calls where id = any(${ids})`;
  return new Map(rows.map((r) => [r.id, r]));
}

describe("kill -9 while live phone calls ring", () => {
  test("after the restart each call is resolved from its room, nobody dialled twice, a due task fires", async () => {
    const N = 20;
    const numbers = Array.from({ length: N }, () => freshNumber());
    // Every callee rings until told otherwise: half of them answer after the crash, the others never.
    const answering = new Set(numbers.filter((_, i) => i % 2 === 0));
    for (const n of numbers) liveKit.scriptDial(n, { kind: "hang" });
    const taskNumber = freshNumber();
    liveKit.scriptDial(taskNumber, { kind: "answer", afterMs: 100 });

    const first = await startServer(env());
    children.push(first);
    const place = (json: Record<string, unknown>) =>
      fetch(`${first.url}/api/v1/calls`, {
        method: "POST",
        headers: { authorization: `Bearer ${seed.liveKey}`, "content-type": "application/json" },
        body: JSON.stringify({ agentId: seed.agent.id, ...json }),
      });
    const ids = await pool(numbers, 8, async (to) => {
      const res = await place({ to });
      expect(res.status).toBe(201);
      return (await res.json()).id as string;
    });
    // A task, made due below while no server runs (an hour ahead until then, however slow this is).
    const taskRes = await place({ to: taskNumber, runAt: new Date(Date.now() + 3_600_000).toISOString() });
    expect(taskRes.status).toBe(201);
    const task = (await taskRes.json()) as { id: string; taskId: string };

    // Every call is ringing: its dial is in flight in the first process.
    await waitUntil(
      "every call to be dialled",
      () => ids.every((id) => liveKit.dialCount(`sip_${id}`) === 1),
      { timeoutMs: 15_000 },
    );
    expect([...(await statuses(ids)).values()].every((c) => c.status === "ringing")).toBe(true);
    first.proc.kill(9);
    expect(await first.exited).not.toBe(0);

    // Half the callees answer while nobody listens; the task comes due.
    liveKit.releaseDials({ kind: "answer" }, (dial) => answering.has(dial.to));
    await db.sql`update timers set due_at = now() where kind = 'task.run' and payload->>'taskId' = ${task.taskId}`;
    expect([...(await statuses(ids)).values()].every((c) => c.status === "ringing")).toBe(true);
    expect((await statuses([task.id])).get(task.id)!.status).toBe("scheduled");

    const second = await startServer(env());
    children.push(second);
    await waitUntil(
      "every call to be resolved",
      async () => {
        const now = await statuses([...ids, task.id]);
        return [...now.values()].every(
          (c) => c.status !== "ringing" && c.status !== "scheduled" && c.status !== "initiated",
        );
      },
      { timeoutMs: 30_000 },
    );

    const final = await statuses(ids);
    for (const [i, id] of ids.entries()) {
      const c = final.get(id)!;
      if (answering.has(numbers[i]!)) {
        expect(c.status).toBe("ongoing");
      } else {
        expect({ status: c.status, outcome: c.outcome }).toEqual({
          status: "failed",
          outcome: "interrupted",
        });
        // The room was deleted: the phone that still rang is hung up.
        expect(liveKit.rooms.has(id)).toBe(false);
      }
      expect(liveKit.dialCount(`sip_${id}`)).toBe(1);
    }
    // The task fired in the second process: dialled once, answered.
    await waitUntil(
      "the task's call to be answered",
      async () => (await statuses([task.id])).get(task.id)!.status === "ongoing",
    );
    expect(liveKit.dialCount(`sip_${task.id}`)).toBe(1);

    const events = await db.sql<{ type: string; calls: number; events: number }[]>`
      select type, count(distinct data->>'id')::int as calls, count(*)::int as events from events
      where data->>'id' = any(${[...ids, task.id]}) group by type order by type`;
    expect([...events]).toEqual([
      { type: "call.ended", calls: N / 2, events: N / 2 },
      { type: "call.started", calls: N / 2 + 1, events: N / 2 + 1 },
    ]);
    // Nothing left to resolve: the answered calls keep only their maxSeconds timers (beside the
    // service's periodic ones).
    const left = await db.sql<{ kind: string; n: number }[]>`
      select kind, count(*)::int as n from timers where kind not in ('housekeeping', 'statistics')
      group by kind order by kind`;
    expect([...left]).toEqual([{ kind: "webcall.max_duration", n: N / 2 + 1 }]);

    second.proc.kill("SIGTERM");
    expect(await second.exited).toBe(0);
    // Longer than the suite's timeout: two servers started in turn, and up to a minute of waiting on them.
  }, 90_000);

  test("a second live process leaves another's dials alone, however long they ring", async () => {
    const [a, b] = [await startServer(env()), await startServer(env())];
    children.push(a, b);
    const numbers = Array.from({ length: 6 }, () => freshNumber());
    // Longer than a safety net's first look (5 s): the nets are due while the dials are under way.
    for (const n of numbers) liveKit.scriptDial(n, { kind: "answer", afterMs: 7000 });
    // One after the other, so that their nets come due at different moments: without holding, each
    // process would take some of them.
    const ids = await pool(numbers, 1, async (to) => {
      await Bun.sleep(300);
      const res = await fetch(`${a.url}/api/v1/calls`, {
        method: "POST",
        headers: { authorization: `Bearer ${seed.liveKey}`, "content-type": "application/json" },
        body: JSON.stringify({ agentId: seed.agent.id, to }),
      });
      expect(res.status).toBe(201);
      return (await res.json()).id as string;
    });
    await waitUntil(
      "every call to be answered",
      async () => [...(await statuses(ids)).values()].every((c) => c.status === "ongoing"),
      { timeoutMs: 30_000 },
    );
    for (const id of ids) {
      expect(liveKit.dialCount(`sip_${id}`)).toBe(1);
      // Nobody asked LiveKit about them: the process dialling them held their nets.
      expect(liveKit.requests.filter((r) => r.method === "ListParticipants" && r.body.room === id)).toEqual(
        [],
      );
    }
    for (const p of [a, b]) p.proc.kill("SIGTERM");
    expect(await a.exited).toBe(0);
    expect(await b.exited).toBe(0);
  });
});
