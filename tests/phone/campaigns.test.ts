import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { pipelinedTransaction } from "../../src/db/engine/connection.ts";
import { updateAgent } from "../../src/services/agents.ts";
import { campaignSteps } from "../../src/services/campaigns.ts";
import type { BatchContext } from "../../src/timers/types.ts";
import { checkMonotonic, checkProgress, type Progress } from "../campaigns/support.ts";
import { liveKitEvents } from "../helpers/fakeLivekit.ts";
import { waitUntil } from "../helpers/wait.ts";
import {
  freshNumber,
  type PhoneSeed,
  type PhoneWorld,
  seedPhoneOrganization,
  startPhoneWorld,
} from "./support.ts";

/** Live campaigns on the one engine: each contact through the live phone call path. */

const ADMIN_TOKEN = "adm_campaign_rules_0123456789abcdefghijklmnopqrstuvwxyz";
let w: PhoneWorld;
beforeAll(async () => {
  w = await startPhoneWorld({ timers: true, env: { ADMIN_TOKEN } });
});
afterAll(() => w.close());

interface Campaign {
  id: string;
  status: string;
  livemode: boolean;
  concurrency: number;
  retryDelaySeconds: number;
  progress: Progress;
}

async function create(world: PhoneWorld, seed: PhoneSeed, json: Record<string, unknown>) {
  const res = await world.ctx.request("/api/v1/campaigns", {
    method: "POST",
    key: seed.liveKey,
    json: { name: "Live", agentId: seed.agent.id, ...json },
  });
  if (res.status !== 201) throw new Error(`campaign answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as Campaign;
}
async function read(world: PhoneWorld, seed: PhoneSeed, id: string): Promise<Campaign> {
  return (await world.ctx.request(`/api/v1/campaigns/${id}`, { key: seed.liveKey })).json();
}
async function callsOf(world: PhoneWorld, campaignId: string) {
  return world.ctx.deps.sql<
    {
      id: string;
      to_number: string;
      status: string;
      outcome: string | null;
      ended_at: Date | null;
      created_at: Date;
    }[]
  >`select id, to_number, status, outcome, ended_at, created_at from calls where campaign_id = ${campaignId} order by id`;
}
/** The callee hangs up (LiveKit's signed webhook): the call completes. */
async function hangUp(world: PhoneWorld, callId: string) {
  const { body, headers } = await world.liveKit.signWebhook(
    liveKitEvents.participantLeft(callId, `sip_${callId}`),
  );
  const res = await world.ctx.request("/api/livekit/webhook", { method: "POST", body, headers });
  expect(res.status).toBe(200);
}
/** Polls the campaign until `done`, checking the invariants on every snapshot and that counters never go down. */
async function watch(
  world: PhoneWorld,
  seed: PhoneSeed,
  c: Campaign,
  done: (c: Campaign) => boolean,
  onTick?: () => Promise<void>,
) {
  let last = c;
  await waitUntil(
    "the campaign to reach the expected state",
    async () => {
      await onTick?.();
      const now = await read(world, seed, c.id);
      checkProgress(now.progress, c.concurrency);
      checkMonotonic(last.progress, now.progress);
      last = now;
      return done(now);
    },
    { timeoutMs: 20_000, stepMs: 30 },
  );
  return last;
}
/** Hangs up every answered (ongoing) call of the campaign. */
async function hangUpAnswered(world: PhoneWorld, campaignId: string) {
  for (const c of await callsOf(world, campaignId)) if (c.status === "ongoing") await hangUp(world, c.id);
}

describe("a live campaign", () => {
  test("a busy contact is retried after retryDelaySeconds, a blocked one never dialled, the rest answered", async () => {
    const seed = await seedPhoneOrganization(w.ctx);
    const [answers, busyOnce, blocked] = [freshNumber(), freshNumber(), freshNumber()];
    w.liveKit.scriptDial(answers, { kind: "answer", afterMs: 100 });
    w.liveKit.scriptDial(busyOnce, { kind: "sip_error", sipStatus: 486, afterMs: 50 });
    await w.ctx.request("/api/v1/blocked-numbers", {
      method: "POST",
      key: seed.liveKey,
      json: { phone: blocked },
    });

    const campaign = await create(w, seed, {
      contacts: [{ phone: blocked }, { phone: answers }, { phone: busyOnce }],
      concurrency: 2,
      maxAttempts: 2,
      retryDelaySeconds: 1,
    });
    expect(campaign).toMatchObject({ status: "running", livemode: true, retryDelaySeconds: 1 });
    // The blocked contact failed at once and left its place to the next: the other two are being called.
    expect(campaign.progress).toMatchObject({ total: 3, inProgress: 2, failed: 1, pending: 0 });

    const done = await watch(
      w,
      seed,
      campaign,
      (c) => c.status === "completed",
      async () => {
        // After its busy answer the second contact answers.
        const calls = await callsOf(w, campaign.id);
        if (calls.some((c) => c.to_number === busyOnce && c.status === "busy")) {
          w.liveKit.scriptDial(busyOnce, { kind: "answer", afterMs: 50 });
        }
        await hangUpAnswered(w, campaign.id);
      },
    );
    expect(done.progress).toEqual({
      total: 3,
      pending: 0,
      inProgress: 0,
      completed: 3,
      succeeded: 2,
      failed: 1,
      cancelled: 0,
    });
    const calls = await callsOf(w, campaign.id);
    const byNumber = (n: string) => calls.filter((c) => c.to_number === n);
    expect(byNumber(answers).map((c) => c.status)).toEqual(["completed"]);
    expect(byNumber(busyOnce).map((c) => c.status)).toEqual(["busy", "completed"]);
    expect(byNumber(blocked).map((c) => [c.status, c.outcome])).toEqual([["failed", "number_blocked"]]);
    // The retry waited retryDelaySeconds after the busy end.
    const [busy, retry] = byNumber(busyOnce);
    expect(retry!.created_at.getTime() - busy!.ended_at!.getTime()).toBeGreaterThanOrEqual(1000);
    expect(w.liveKit.dialCount(`sip_${busy!.id}`) + w.liveKit.dialCount(`sip_${retry!.id}`)).toBe(2);
    expect(w.liveKit.dials.filter((d) => d.to === blocked)).toEqual([]);
    const events = await w.ctx.deps.sql<{ type: string }[]>`
      select type from events where data->>'id' = ${campaign.id} order by id`;
    expect(events.map((e) => e.type)).toEqual(["campaign.started", "campaign.completed"]);
    const [blockedCall] = byNumber(blocked);
    const ended = await w.ctx.deps.sql`select type from events where data->>'id' = ${blockedCall!.id}`;
    expect(ended.map((e) => e.type)).toEqual(["call.ended"]);
  });

  test("a country not allowed fails at once; unanswered to the last attempt fails; never more than maxAttempts", async () => {
    const seed = await seedPhoneOrganization(w.ctx, { allowedCountries: ["FR"] });
    const neverAnswers = freshNumber();
    w.liveKit.scriptDial(neverAnswers, { kind: "sip_error", sipStatus: 480, afterMs: 20 });
    const campaign = await create(w, seed, {
      contacts: [{ phone: neverAnswers }, { phone: "+12125550123" }],
      concurrency: 1,
      maxAttempts: 3,
      retryDelaySeconds: 0,
    });
    const done = await watch(w, seed, campaign, (c) => c.status === "completed");
    expect(done.progress).toMatchObject({ completed: 2, succeeded: 0, failed: 2 });
    const calls = await callsOf(w, campaign.id);
    expect(calls.filter((c) => c.to_number === neverAnswers).map((c) => c.status)).toEqual([
      "no_answer",
      "no_answer",
      "no_answer",
    ]);
    expect(calls.filter((c) => c.to_number === "+12125550123").map((c) => c.outcome)).toEqual([
      "country_not_allowed",
    ]);
  });

  test("calls in progress never exceed the organization's maxConcurrentCalls; the campaign waits for room", async () => {
    const seed = await seedPhoneOrganization(w.ctx, { maxConcurrentCalls: 1 });
    const numbers = [freshNumber(), freshNumber(), freshNumber()];
    for (const n of numbers) w.liveKit.scriptDial(n, { kind: "answer", afterMs: 50 });
    const campaign = await create(w, seed, { contacts: numbers.map((phone) => ({ phone })), concurrency: 3 });
    expect(campaign.progress).toMatchObject({ inProgress: 1, pending: 2 });
    let most = 0;
    const done = await watch(
      w,
      seed,
      campaign,
      (c) => c.status === "completed",
      async () => {
        const [row] = await w.ctx.deps.sql<{ n: number }[]>`
        select count(*)::int as n from calls where organization_id = ${seed.org.id} and livemode
          and status in ('initiated', 'ringing', 'ongoing')`;
        most = Math.max(most, row!.n);
        await hangUpAnswered(w, campaign.id);
      },
    );
    expect(done.progress).toMatchObject({ succeeded: 3, failed: 0 });
    expect(most).toBe(1);
  });

  test("the hourly limit makes it wait, running, with a timer when the hour has room again", async () => {
    const seed = await seedPhoneOrganization(w.ctx, { maxCallsPerHour: 1 });
    const first = freshNumber();
    w.liveKit.scriptDial(first, { kind: "sip_error", sipStatus: 486, afterMs: 20 });
    const campaign = await create(w, seed, {
      contacts: [{ phone: first }, { phone: freshNumber() }],
      concurrency: 2,
      maxAttempts: 1,
    });
    expect(campaign.progress).toMatchObject({ inProgress: 1, pending: 1 });
    await waitUntil(
      "the first contact to fail",
      async () => (await read(w, seed, campaign.id)).progress.failed === 1,
    );
    const now = await read(w, seed, campaign.id);
    expect(now).toMatchObject({ status: "running", progress: { pending: 1, inProgress: 0, failed: 1 } });
    const [timer] = await w.ctx.deps.sql<{ wait: number }[]>`
      select extract(epoch from due_at - now())::int as wait from timers
      where kind = 'campaign.advance' and payload->>'campaignId' = ${campaign.id} order by due_at desc limit 1`;
    expect(timer!.wait).toBeGreaterThan(3500);
    expect(timer!.wait).toBeLessThanOrEqual(3600);
  });

  test("when the agent becomes inactive, the contacts not yet called fail with agent_unavailable, and it completes", async () => {
    const seed = await seedPhoneOrganization(w.ctx);
    const numbers = [freshNumber(), freshNumber(), freshNumber()];
    for (const n of numbers) w.liveKit.scriptDial(n, { kind: "answer", afterMs: 50 });
    const campaign = await create(w, seed, { contacts: numbers.map((phone) => ({ phone })), concurrency: 1 });
    await waitUntil("an answered call", async () =>
      (await callsOf(w, campaign.id)).some((c) => c.status === "ongoing"),
    );
    await updateAgent(w.ctx.deps, seed.agent.id, { active: false });
    await hangUpAnswered(w, campaign.id);
    const done = await watch(w, seed, campaign, (c) => c.status === "completed");
    expect(done.progress).toMatchObject({ succeeded: 1, failed: 2, pending: 0, inProgress: 0 });
    const outcomes = (await callsOf(w, campaign.id)).map((c) => `${c.status} ${c.outcome}`);
    expect(outcomes).toEqual(["completed null", "failed agent_unavailable", "failed agent_unavailable"]);
    expect(w.liveKit.dials.filter((d) => numbers.slice(1).includes(d.to))).toEqual([]);
  });

  test("plan minutes all reserved wait for the call in progress; once none come back, the rest fail", async () => {
    const seed = await seedPhoneOrganization(w.ctx, {}, { planMinutes: 1 });
    const numbers = [freshNumber(), freshNumber()];
    for (const n of numbers) w.liveKit.scriptDial(n, { kind: "answer", afterMs: 50 });
    // The first call reserves the one minute there is; the second contact waits for it, not failed.
    const campaign = await create(w, seed, { contacts: numbers.map((phone) => ({ phone })), concurrency: 2 });
    expect(campaign.progress).toMatchObject({ inProgress: 1, pending: 1, failed: 0 });
    await waitUntil("the first call to be answered", async () =>
      (await callsOf(w, campaign.id)).some((c) => c.status === "ongoing"),
    );
    expect((await read(w, seed, campaign.id)).progress).toMatchObject({
      inProgress: 1,
      pending: 1,
      failed: 0,
    });
    // It keeps its minute: nothing is reserved any more and nothing comes back.
    const done = await watch(
      w,
      seed,
      campaign,
      (c) => c.status === "completed",
      () => hangUpAnswered(w, campaign.id),
    );
    expect(done.progress).toMatchObject({ succeeded: 1, failed: 1 });
    const outcomes = (await callsOf(w, campaign.id)).map((c) => c.outcome);
    expect(outcomes).toEqual([null, "plan_minutes_exhausted"]);
  });

  test("200 plan minutes, concurrency 5: the fifth contact waits for minutes to come back, and everyone is called", async () => {
    // Each phone call reserves up to an hour: 60 + 60 + 60 + 20, and nothing is left for the fifth.
    const seed = await seedPhoneOrganization(w.ctx, {}, { planMinutes: 200 });
    const numbers = Array.from({ length: 8 }, () => freshNumber());
    for (const n of numbers) w.liveKit.scriptDial(n, { kind: "answer", afterMs: 50 });
    const campaign = await create(w, seed, { contacts: numbers.map((phone) => ({ phone })), concurrency: 5 });
    expect(campaign.progress).toMatchObject({ inProgress: 4, pending: 4, failed: 0 });
    const [reserved] = await w.ctx.deps.sql<{ minutes: number[] }[]>`
      select array_agg(r.reserved_minutes order by r.reserved_minutes desc)::int[] as minutes
      from minute_reservations r join calls c on c.id = r.call_id where c.campaign_id = ${campaign.id}`;
    expect(reserved!.minutes).toEqual([60, 60, 60, 20]);
    const done = await watch(
      w,
      seed,
      campaign,
      (c) => c.status === "completed",
      () => hangUpAnswered(w, campaign.id),
    );
    expect(done.progress).toMatchObject({ total: 8, succeeded: 8, failed: 0 });
    const calls = await callsOf(w, campaign.id);
    expect(calls.map((c) => c.status)).toEqual(Array(8).fill("completed"));
    for (const n of numbers) expect(w.liveKit.dials.filter((d) => d.to === n).length).toBe(1);
  });

  test("plan minutes reserved by the organization's other calls: it waits, with a timer, then goes on", async () => {
    // 61 minutes: another call of the organization holds 60 of them.
    const seed = await seedPhoneOrganization(w.ctx, {}, { planMinutes: 61 });
    const other = freshNumber();
    w.liveKit.scriptDial(other, { kind: "answer", afterMs: 50 });
    const placed = await w.ctx.request("/api/v1/calls", {
      method: "POST",
      key: seed.liveKey,
      json: { agentId: seed.agent.id, to: other },
    });
    const otherId = (await placed.json()).id as string;
    const numbers = [freshNumber(), freshNumber()];
    for (const n of numbers) w.liveKit.scriptDial(n, { kind: "answer", afterMs: 50 });
    const campaign = await create(w, seed, { contacts: numbers.map((phone) => ({ phone })), concurrency: 1 });
    // The first contact's call takes the last minute and keeps it: then only the other call holds any.
    await waitUntil("the first contact's call to be answered", async () =>
      (await callsOf(w, campaign.id)).some((c) => c.status === "ongoing"),
    );
    await hangUpAnswered(w, campaign.id);
    await waitUntil("the campaign to wait with a timer", async () => {
      const c = await read(w, seed, campaign.id);
      const [row] = await w.ctx.deps.sql<{ wake_at: Date | null }[]>`
          select wake_at from campaigns where id = ${campaign.id}`;
      return c.progress.succeeded === 1 && c.progress.pending === 1 && row!.wake_at !== null;
    });
    // Woken by a timer a few seconds after the call that kept the last minute ended.
    const [waiting] = await w.ctx.deps.sql<{ wake_at: Date; ended_at: Date; timer: boolean }[]>`
      select c.wake_at, k.ended_at, exists(select 1 from timers t where t.kind = 'campaign.advance'
        and t.payload->>'campaignId' = c.id and t.due_at = c.wake_at) as timer
      from campaigns c join calls k on k.campaign_id = c.id and k.status = 'completed' where c.id = ${campaign.id}`;
    expect(waiting!.timer).toBe(true);
    expect(waiting!.wake_at.getTime() - waiting!.ended_at.getTime()).toBeGreaterThanOrEqual(5000);
    expect((await read(w, seed, campaign.id)).progress).toMatchObject({ failed: 0, pending: 1 });
    // The other call ends and gives back 59 minutes: the waiting contact is called.
    await hangUp(w, otherId);
    const done = await watch(
      w,
      seed,
      campaign,
      (c) => c.status === "completed",
      () => hangUpAnswered(w, campaign.id),
    );
    expect(done.progress).toMatchObject({ succeeded: 2, failed: 0 });
  });

  test("a cancel: contacts not yet called are never called, the call in progress finishes", async () => {
    const seed = await seedPhoneOrganization(w.ctx);
    const numbers = [freshNumber(), freshNumber()];
    w.liveKit.scriptDial(numbers[0]!, { kind: "hang" });
    const campaign = await create(w, seed, { contacts: numbers.map((phone) => ({ phone })), concurrency: 1 });
    const res = await w.ctx.request(`/api/v1/campaigns/${campaign.id}/cancel`, {
      method: "POST",
      key: seed.liveKey,
    });
    expect((await res.json()).progress).toMatchObject({ cancelled: 1, inProgress: 1 });
    await waitUntil("the first dial", () => w.liveKit.dials.some((d) => d.to === numbers[0]));
    w.liveKit.releaseDials({ kind: "sip_error", sipStatus: 486 });
    const done = await watch(w, seed, campaign, (c) => c.progress.inProgress === 0);
    expect(done).toMatchObject({ status: "cancelled", progress: { cancelled: 1, failed: 1, pending: 0 } });
    expect(w.liveKit.dials.filter((d) => d.to === numbers[1])).toEqual([]);
  });
});

describe("live campaign creation", () => {
  test("plan, minutes, carrier and agent are checked first; nothing written when refused", async () => {
    const contacts = [{ phone: freshNumber() }];
    const count = async () =>
      (await w.ctx.deps.sql`select count(*)::int as n from campaigns`)[0]!.n as number;
    const before = await count();
    const attempt = async (seed: PhoneSeed) =>
      w.ctx.request("/api/v1/campaigns", {
        method: "POST",
        key: seed.liveKey,
        json: { name: "x", agentId: seed.agent.id, contacts },
      });
    const codeOf = async (r: Response) => `${r.status} ${(await r.json()).error?.code}`;
    const unpaid = await seedPhoneOrganization(w.ctx, { paidPlan: false });
    expect(await codeOf(await attempt(unpaid))).toBe("403 plan_required");
    const empty = await seedPhoneOrganization(w.ctx, {}, { planMinutes: 0 });
    expect(await codeOf(await attempt(empty))).toBe("403 plan_minutes_exhausted");
    const inactive = await seedPhoneOrganization(w.ctx);
    await updateAgent(w.ctx.deps, inactive.agent.id, { active: false });
    expect(await codeOf(await attempt(inactive))).toBe("503 agent_unavailable");
    const trunk = w.ctx.deps.env.LIVEKIT_SIP_TRUNK_ID;
    w.ctx.deps.env.LIVEKIT_SIP_TRUNK_ID = undefined;
    try {
      expect(await codeOf(await attempt(inactive))).toBe("503 carrier_unavailable");
    } finally {
      w.ctx.deps.env.LIVEKIT_SIP_TRUNK_ID = trunk;
    }
    expect(await count()).toBe(before);
  });

  test.each([-1, 86_401, 1.5, "60"])(
    "retryDelaySeconds %p is 400 invalid_request",
    async (retryDelaySeconds) => {
      const seed = await seedPhoneOrganization(w.ctx);
      const res = await w.ctx.request("/api/v1/campaigns", {
        method: "POST",
        key: seed.liveKey,
        json: { name: "x", agentId: seed.agent.id, contacts: [{ phone: freshNumber() }], retryDelaySeconds },
      });
      expect(res.status).toBe(400);
      expect((await res.json()).error).toMatchObject({ code: "invalid_request", param: "retryDelaySeconds" });
    },
  );
});

/**
 * Monday 2027-01-04 08:00 in Paris (07:00 UTC), on a clock of its own, an organization whose window
 * opens at 09:00 and a campaign of one contact (who answers): the wake timer is an hour ahead.
 */
async function outsideTheWindow(
  run: (t: {
    timed: PhoneWorld;
    clock: ManualClock;
    seed: PhoneSeed;
    to: string;
    campaign: Campaign;
  }) => Promise<void>,
) {
  const clock = new ManualClock("2027-01-04T07:00:00.000Z");
  const timed = await startPhoneWorld({ timers: true, clock, env: { ADMIN_TOKEN } });
  try {
    const seed = await seedPhoneOrganization(timed.ctx, {
      callWindow: { start: "09:00", end: "18:00", timeZone: "Europe/Paris", days: [1, 2, 3, 4, 5] },
    });
    const to = freshNumber();
    timed.liveKit.scriptDial(to, { kind: "answer", afterMs: 50 });
    const campaign = await create(timed, seed, { contacts: [{ phone: to }] });
    await run({ timed, clock, seed, to, campaign });
  } finally {
    await timed.close();
  }
}

describe("a live campaign outside the call window", () => {
  test("waits, still running, with a timer at the next opening, and calls once the window opens", async () => {
    await outsideTheWindow(async ({ timed, clock, seed, to, campaign }) => {
      expect(campaign).toMatchObject({ status: "running", progress: { pending: 1, inProgress: 0 } });
      const timers = await timed.ctx.deps.sql<{ id: string; due_at: Date }[]>`
        select id::text, due_at from timers where kind = 'campaign.advance' and payload->>'campaignId' = ${campaign.id}`;
      expect(timers.map((t) => t.due_at.toISOString())).toEqual(["2027-01-04T08:00:00.000Z"]);
      await Bun.sleep(300);
      expect(timed.liveKit.dials.length).toBe(0);

      // 09:00 in Paris: the timer fires (brought to now here) and the call goes out.
      clock.set("2027-01-04T08:00:00.000Z");
      await timed.ctx.deps.sql`update timers set due_at = now() where id = ${timers[0]!.id}::bigint`;
      await waitUntil(
        "a call in progress",
        async () => (await read(timed, seed, campaign.id)).progress.inProgress === 1,
      );
      await waitUntil("the dial", () => timed.liveKit.dials.some((d) => d.to === to));
    });
  });
});

describe("a live campaign waiting on the organization's rules, when an operator changes them", () => {
  async function patchOrganization(world: PhoneWorld, id: string, json: Record<string, unknown>) {
    const res = await world.ctx.request(`/api/admin/v1/organizations/${id}`, {
      method: "PATCH",
      key: ADMIN_TOKEN,
      json,
    });
    expect(res.status).toBe(200);
  }

  test("a call window removed: it calls at once, not at the old window's opening, and only once", async () => {
    // It waits an hour; the clock stays put.
    await outsideTheWindow(async ({ timed, clock, seed, to, campaign }) => {
      expect(campaign.progress).toMatchObject({ pending: 1, inProgress: 0 });
      await Bun.sleep(300);
      expect(timed.liveKit.dials.filter((d) => d.to === to)).toHaveLength(0);

      await patchOrganization(timed, seed.org.id, { callWindow: null });
      await waitUntil("the dial", () => timed.liveKit.dials.some((d) => d.to === to));
      expect((await read(timed, seed, campaign.id)).progress).toMatchObject({ pending: 0, inProgress: 1 });

      // The old opening's timer still fires: it finds nothing left to call.
      clock.set("2027-01-04T08:00:00.000Z");
      await timed.ctx.deps.sql`
        update timers set due_at = now()
        where kind = 'campaign.advance' and payload->>'campaignId' = ${campaign.id}`;
      await waitUntil(
        "no campaign timer left",
        async () =>
          (
            await timed.ctx.deps.sql`
              select 1 from timers where kind = 'campaign.advance' and payload->>'campaignId' = ${campaign.id}`
          ).length === 0,
      );
      expect(timed.liveKit.dials.filter((d) => d.to === to)).toHaveLength(1);
    });
  });

  /** A campaign of two contacts whose first used the hour's one call (busy): the second waits for the hour. */
  async function waitingForTheHour(world: PhoneWorld) {
    const seed = await seedPhoneOrganization(world.ctx, { maxCallsPerHour: 1 });
    const [first, second] = [freshNumber(), freshNumber()];
    world.liveKit.scriptDial(first, { kind: "sip_error", sipStatus: 486, afterMs: 20 });
    world.liveKit.scriptDial(second, { kind: "answer", afterMs: 20 });
    const campaign = await create(world, seed, {
      contacts: [{ phone: first }, { phone: second }],
      concurrency: 2,
      maxAttempts: 1,
    });
    await waitUntil(
      "the first contact to fail",
      async () => (await read(world, seed, campaign.id)).progress.failed === 1,
    );
    return { seed, campaign, second };
  }

  test("the hourly limit raised: the contact that waited for the hour is called at once", async () => {
    const { seed, second } = await waitingForTheHour(w);
    await Bun.sleep(300);
    expect(w.liveKit.dials.filter((d) => d.to === second)).toHaveLength(0);

    await patchOrganization(w, seed.org.id, { maxCallsPerHour: 10 });
    await waitUntil("the second contact's dial", () => w.liveKit.dials.some((d) => d.to === second));
  });

  test("a change that still refuses: it goes back to waiting, nothing dialled", async () => {
    const { seed, campaign, second } = await waitingForTheHour(w);
    await patchOrganization(w, seed.org.id, { name: "Renamed" });
    await waitUntil(
      "the woken step to have run",
      async () =>
        (
          await w.ctx.deps.sql`
            select 1 from timers where kind = 'campaign.advance' and payload->>'campaignId' = ${campaign.id}
              and due_at <= now() + interval '1 minute'`
        ).length === 0,
    );
    expect(await read(w, seed, campaign.id)).toMatchObject({
      status: "running",
      progress: { pending: 1, inProgress: 0, failed: 1 },
    });
    expect(w.liveKit.dials.filter((d) => d.to === second)).toHaveLength(0);
    // Still woken when the hour has room again.
    const [later] = await w.ctx.deps.sql<{ wait: number }[]>`
      select extract(epoch from max(due_at) - now())::int as wait from timers
      where kind = 'campaign.advance' and payload->>'campaignId' = ${campaign.id}`;
    expect(later!.wait).toBeGreaterThan(3500);
  });
});

describe("a large live campaign that stops", () => {
  test("300 contacts not yet called fail in one step, in a number of statements that does not grow with them", async () => {
    // Saturday: outside the window, so the campaign waits with every contact pending.
    const clock = new ManualClock("2027-01-02T10:00:00.000Z");
    const world = await startPhoneWorld({ clock });
    try {
      const seed = await seedPhoneOrganization(world.ctx, {
        callWindow: { start: "09:00", end: "18:00", timeZone: "UTC", days: [1, 2, 3, 4, 5] },
      });
      const contacts = Array.from({ length: 300 }, (_, i) => ({ phone: freshNumber(), variables: { n: i } }));
      const campaign = await create(world, seed, { contacts, concurrency: 10 });
      expect(campaign.progress).toMatchObject({ total: 300, pending: 300, inProgress: 0 });
      // The agent becomes inactive; on Monday the window opens and the next step stops the campaign.
      await updateAgent(world.ctx.deps, seed.agent.id, { active: false });
      clock.set("2027-01-04T10:00:00.000Z");
      let statements = 0;
      await pipelinedTransaction(world.ctx.deps.sql, (tx) => {
        const counted = new Proxy(tx, {
          apply(target, self, args) {
            statements += 1;
            return Reflect.apply(target, self, args);
          },
        });
        const timer = {
          id: "0",
          kind: "campaign.advance",
          payload: { campaignId: campaign.id },
          dueAt: clock.now(),
          attempts: 0,
        };
        return campaignSteps(world.ctx.deps)({
          tx: counted,
          timers: [timer],
          afterCommit: () => {},
        } as unknown as BatchContext);
      });
      // Six or so per contact once (1,800 here): now a few dozen for them all, the placement's two
      // looks at the first contact included (its organization and agent were never read here).
      expect(statements).toBeLessThan(50);

      const done = await read(world, seed, campaign.id);
      expect(done).toMatchObject({
        status: "completed",
        progress: {
          total: 300,
          pending: 0,
          inProgress: 0,
          completed: 300,
          succeeded: 0,
          failed: 300,
          cancelled: 0,
        },
      });
      // Each contact: a call of its own, failed with the code, never placed, and its call.ended.
      const rows = await world.ctx.deps.sql<
        {
          position: number;
          status: string;
          call_id: string;
          call: Record<string, unknown>;
          placed_at: Date | null;
          event: Record<string, unknown> | null;
          event_id: string | null;
        }[]
      >`
        select cc.position, cc.status, cc.call_id, c.placed_at,
          json_build_object('status', c.status, 'outcome', c.outcome, 'to', c.to_number, 'variables', c.variables,
            'successful', c.successful, 'livemode', c.livemode, 'direction', c.direction,
            'ended', c.ended_at = c.created_at, 'started', c.started_at) as call,
          e.data as event, e.id as event_id
        from campaign_contacts cc join calls c on c.id = cc.call_id
        left join events e on e.data->>'id' = c.id and e.type = 'call.ended'
        where cc.campaign_id = ${campaign.id} order by cc.position`;
      expect(rows.length).toBe(300);
      for (const [i, r] of rows.entries()) {
        expect(r.status).toBe("failed");
        expect(r.placed_at).toBeNull();
        expect(r.call).toEqual({
          status: "failed",
          outcome: "agent_unavailable",
          to: contacts[i]!.phone,
          variables: { n: i },
          successful: false,
          livemode: true,
          direction: "outbound",
          ended: true,
          started: null,
        });
        const api = await (
          await world.ctx.request(`/api/v1/calls/${r.call_id}`, { key: seed.liveKey })
        ).json();
        if (i % 50 === 0) expect(r.event).toEqual(api);
        expect(r.event).toMatchObject({ id: r.call_id, status: "failed", outcome: "agent_unavailable" });
      }
      // Events in the contacts' order, then the campaign's completion.
      const ids = rows.map((r) => r.event_id!);
      expect([...ids].sort()).toEqual(ids);
      const types = await world.ctx.deps.sql<{ type: string }[]>`
        select type from events where data->>'id' = ${campaign.id} or data->>'campaignId' = ${campaign.id}
        order by id`;
      expect(types.map((t) => t.type)).toEqual([
        "campaign.started",
        ...Array(300).fill("call.ended"),
        "campaign.completed",
      ]);
      const [left] = await world.ctx.deps.sql<{ reservations: number; timers: number }[]>`
        select (select count(*)::int from minute_reservations r join calls c on c.id = r.call_id
          where c.campaign_id = ${campaign.id}) as reservations,
        (select count(*)::int from timers where payload->>'callId' in
          (select id from calls where campaign_id = ${campaign.id})) as timers`;
      expect(left).toEqual({ reservations: 0, timers: 0 });
    } finally {
      await world.close();
    }
  });
});
