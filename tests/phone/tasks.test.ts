import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { updateAgent } from "../../src/services/agents.ts";
import { usedMinutes } from "../../src/services/minutes.ts";
import { updateOrganization } from "../../src/services/organizations.ts";
import { waitUntil } from "../helpers/wait.ts";
import {
  freshNumber,
  type PhoneWorld,
  placeCall,
  seedPhoneOrganization,
  startPhoneWorld,
} from "./support.ts";

/** Scheduled tasks fire through the live path and run every check again; a refusal ends the call failed. */

let w: PhoneWorld;
beforeAll(async () => {
  w = await startPhoneWorld({ timers: true });
});
afterAll(() => w.close());

/** An hour ahead: scheduled however slow the request. The test brings the task due with `fire`. */
const later = () => new Date(Date.now() + 3_600_000).toISOString();

async function schedule(
  seed: Awaited<ReturnType<typeof seedPhoneOrganization>>,
  to: string,
  runAt = later(),
) {
  const res = await placeCall(w.ctx, seed.liveKey, {
    agentId: seed.agent.id,
    to,
    runAt,
    variables: { reminder: true },
  });
  expect(res.status).toBe(201);
  const call = await res.json();
  expect(call.status).toBe("scheduled");
  return call as { id: string; taskId: string };
}
/** The tasks' timers come due now, as when their runAt comes; returns that moment, by the database. */
async function fire(...calls: { taskId: string }[]): Promise<Date> {
  const rows = await w.ctx.deps.sql<{ at: Date }[]>`
    update timers set due_at = now() where kind = 'task.run' and payload->>'taskId' = any(${calls.map((c) => c.taskId)})
    returning now() as at`;
  expect(rows.length).toBe(calls.length);
  return rows[0]!.at;
}
async function settle(id: string, statuses: string[]) {
  let row: Record<string, unknown> = {};
  await waitUntil("the call to settle", async () => {
    const rows = await w.ctx.deps.sql<Record<string, unknown>[]>`
      select status, outcome, placed_at from calls where id = ${id}`;
    row = rows[0]!;
    return statuses.includes(String(row.status));
  });
  return row;
}
async function events(id: string) {
  const rows = await w.ctx.deps.sql<{ type: string; status: string; outcome: string | null }[]>`
    select type, data->>'status' as status, data->>'outcome' as outcome from events where data->>'id' = ${id} order by id`;
  return rows.map((r) => `${r.type} ${r.status} ${r.outcome}`);
}

describe("a task whose checks pass", () => {
  test("is placed when it fires, dialled once, answered; it leaves the list; it counts in the hour then", async () => {
    const seed = await seedPhoneOrganization(w.ctx);
    const to = freshNumber();
    const call = await schedule(seed, to);
    const firedAt = await fire(call);
    const done = await settle(call.id, ["ongoing"]);
    expect((done.placed_at as Date).getTime()).toBeGreaterThanOrEqual(firedAt.getTime());
    expect(w.liveKit.dialCount(`sip_${call.id}`)).toBe(1);
    const dispatch = w.liveKit.dispatches.find((d) => d.room === call.id)!;
    expect(JSON.parse(dispatch.metadata)).toEqual({
      callId: call.id,
      variables: { reminder: true },
      direction: "outbound",
      to,
    });
    expect(await events(call.id)).toEqual(["call.started ongoing null"]);
    const { tasks } = await (await w.ctx.request("/api/v1/tasks", { key: seed.liveKey })).json();
    expect(tasks).toEqual([]);
    const [limits] = await w.ctx.deps
      .sql`select hour_count from call_limits where organization_id = ${seed.org.id}`;
    expect(limits!.hour_count).toBe(1);
  });
});

describe("a task refused when it fires", () => {
  const cases: [
    string,
    (seed: Awaited<ReturnType<typeof seedPhoneOrganization>>, to: string) => Promise<void>,
  ][] = [
    ["plan_required", (s) => updateOrganization(w.ctx.deps, s.org.id, { paidPlan: false }).then(() => {})],
    [
      "plan_minutes_exhausted",
      (s) => updateOrganization(w.ctx.deps, s.org.id, { planMinutes: 0 }).then(() => {}),
    ],
    [
      "carrier_unavailable",
      async (s) => {
        await updateOrganization(w.ctx.deps, s.org.id, { sipTrunkId: null });
        w.ctx.deps.env.LIVEKIT_SIP_TRUNK_ID = undefined;
      },
    ],
    ["agent_unavailable", (s) => updateAgent(w.ctx.deps, s.agent.id, { active: false }).then(() => {})],
    [
      "number_blocked",
      async (s, to) => {
        await w.ctx.request("/api/v1/blocked-numbers", {
          method: "POST",
          key: s.liveKey,
          json: { phone: to },
        });
      },
    ],
    [
      "country_not_allowed",
      (s) => updateOrganization(w.ctx.deps, s.org.id, { allowedCountries: ["BE"] }).then(() => {}),
    ],
    [
      "outside_call_window",
      (s) =>
        // Open one hour a week, and not now (the window is in UTC, around the moment it is set).
        updateOrganization(w.ctx.deps, s.org.id, {
          callWindow: {
            start: hourFromNow(3),
            end: hourFromNow(4),
            timeZone: "UTC",
            days: [1, 2, 3, 4, 5, 6, 7],
          },
        }).then(() => {}),
    ],
    [
      "concurrency_limit_reached",
      async (s) => {
        await updateOrganization(w.ctx.deps, s.org.id, { maxConcurrentCalls: 1 });
        await w.ctx.deps.sql`
          insert into calls (id, organization_id, livemode, status, agent_id, to_number, direction, created_at, placed_at,
            updated_at)
          values (${w.ctx.deps.ids.next("call")}, ${s.org.id}, true, 'ongoing', ${s.agent.id}, '+33600000001',
            'outbound', now(), now(), now())`;
      },
    ],
    [
      "hourly_limit_reached",
      async (s) => {
        await updateOrganization(w.ctx.deps, s.org.id, { maxCallsPerHour: 1 });
        await w.ctx.deps.sql`
          insert into calls (id, organization_id, livemode, status, agent_id, to_number, direction, created_at, placed_at,
            updated_at)
          values (${w.ctx.deps.ids.next("call")}, ${s.org.id}, true, 'completed', ${s.agent.id}, '+33600000002',
            'outbound', now(), now(), now())`;
      },
    ],
  ];

  test.each(cases)(
    "%s: failed with that outcome, call.ended, never dialled, nothing reserved or counted",
    async (code, breakIt) => {
      const seed = await seedPhoneOrganization(w.ctx);
      const to = freshNumber();
      const trunk = w.ctx.deps.env.LIVEKIT_SIP_TRUNK_ID;
      const call = await schedule(seed, to);
      try {
        // Broken between the scheduling and the firing.
        await breakIt(seed, to);
        await fire(call);
        const done = await settle(call.id, ["failed", "initiated", "ringing", "ongoing"]);
        expect(done).toMatchObject({ status: "failed", outcome: code, placed_at: null });
      } finally {
        w.ctx.deps.env.LIVEKIT_SIP_TRUNK_ID = trunk;
      }
      expect(await events(call.id)).toEqual([`call.ended failed ${code}`]);
      expect(w.liveKit.dialCount(`sip_${call.id}`)).toBe(0);
      expect(
        (await w.ctx.deps.sql`select 1 from minute_reservations where call_id = ${call.id}`).length,
      ).toBe(0);
      expect(await usedMinutes(w.ctx.deps.sql, w.ctx.deps.clock, { organizationId: seed.org.id })).toBe(0);
      // The hour counts the placements there are (those this test made to break a limit), not the refusal.
      const [limits] = await w.ctx.deps.sql<{ counted: number | null; placed: number }[]>`
      select (select hour_count from call_limits where organization_id = ${seed.org.id}) as counted,
        (select count(*)::int from calls where organization_id = ${seed.org.id} and placed_at is not null) as placed`;
      expect(limits!.counted ?? 0).toBe(limits!.placed);
      const { tasks } = await (await w.ctx.request("/api/v1/tasks", { key: seed.liveKey })).json();
      expect(tasks).toEqual([]);
    },
  );

  /** A contact of a new organization, and a task calling it at `runAt` (an hour ahead). */
  async function scheduleForContact() {
    const seed = await seedPhoneOrganization(w.ctx);
    const to = freshNumber();
    const made = await w.ctx.request("/api/v1/contacts", {
      method: "POST",
      key: seed.liveKey,
      json: { phone: to, name: "Reminder" },
    });
    expect(made.status).toBe(201);
    const contact = (await made.json()) as { id: string };
    const res = await placeCall(w.ctx, seed.liveKey, {
      agentId: seed.agent.id,
      contactId: contact.id,
      to,
      runAt: later(),
    });
    expect(res.status).toBe(201);
    const call = (await res.json()) as { id: string; taskId: string; contactId: string };
    expect(call.contactId).toBe(contact.id);
    return { seed, contact, call };
  }

  test("a task whose contact was deleted before it fired: failed not_found, call.ended, never dialled", async () => {
    const { seed, contact, call } = await scheduleForContact();
    const gone = await w.ctx.request(`/api/v1/contacts/${contact.id}`, {
      method: "DELETE",
      key: seed.liveKey,
    });
    expect(gone.status).toBe(200);
    await fire(call);
    const done = await settle(call.id, ["failed", "initiated", "ringing", "ongoing"]);
    expect(done).toMatchObject({ status: "failed", outcome: "not_found", placed_at: null });
    expect(await events(call.id)).toEqual(["call.ended failed not_found"]);
    expect(w.liveKit.dialCount(`sip_${call.id}`)).toBe(0);
  });

  test("a task whose contact is still there is placed and dialled", async () => {
    const { call } = await scheduleForContact();
    await fire(call);
    await settle(call.id, ["ringing", "ongoing", "completed"]);
    await waitUntil("the dial", () => w.liveKit.dialCount(`sip_${call.id}`) === 1);
  });

  test("two tasks of one organization firing together with room for one: one placed, one refused", async () => {
    const seed = await seedPhoneOrganization(w.ctx, { maxConcurrentCalls: 1 });
    const runAt = later();
    const a = await schedule(seed, freshNumber(), runAt);
    const b = await schedule(seed, freshNumber(), runAt);
    await fire(a, b);
    const [ra, rb] = await Promise.all([
      settle(a.id, ["failed", "ringing", "ongoing"]),
      settle(b.id, ["failed", "ringing", "ongoing"]),
    ]);
    expect([ra.status === "failed", rb.status === "failed"].sort()).toEqual([false, true]);
    expect([ra.outcome, rb.outcome]).toContain("concurrency_limit_reached");
  });
});

function hourFromNow(h: number): string {
  return `${String((new Date().getUTCHours() + h) % 24).padStart(2, "0")}:00`;
}
