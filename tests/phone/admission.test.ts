import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { readCallFactsOf } from "../../src/db/callAdmission.ts";
import { canonicalNumber } from "../../src/phoneNumbers.ts";
import { updateAgent } from "../../src/services/agents.ts";
import { createSecretKey } from "../../src/services/keys.ts";
import { monthOf } from "../../src/services/minutes.ts";
import { updateOrganization } from "../../src/services/organizations.ts";
import { outcomeOf } from "../helpers/errors.ts";
import {
  CALLER,
  freshNumber,
  type PhoneWorld,
  placeCall,
  placementWrites,
  seedPhoneOrganization,
  startPhoneWorld,
  TRUNK,
} from "./support.ts";

/**
 * Live POST /v1/calls: every refusal of the calling rules, in their order, each writing nothing; the
 * country from the numbering plan; the call window; what a 201 writes. No timer runner here: calls
 * stay `initiated` (dialling has its own tests).
 */

// Monday 2026-11-23 10:00 in Paris (09:00 UTC).
const MONDAY_10_PARIS = "2026-11-23T09:00:00.000Z";
const clock = new ManualClock(MONDAY_10_PARIS);
let w: PhoneWorld;

beforeAll(async () => {
  w = await startPhoneWorld({ clock });
});
afterAll(() => w.close());

const WEEKDAYS_PARIS = { start: "09:00", end: "20:00", timeZone: "Europe/Paris", days: [1, 2, 3, 4, 5] };

describe("the order of the checks", () => {
  test("each refusal in turn, with its code, writing nothing, until the 201", async () => {
    clock.set(MONDAY_10_PARIS);
    const seed = await seedPhoneOrganization(w.ctx, {}, { planMinutes: 0 });
    const org = seed.org.id;
    const other = await w.ctx.deps.sql<{ id: string }[]>`
      insert into agents (id, organization_id, name, active, created_at)
      values (${w.ctx.deps.ids.next("agt")}, ${org}, 'Other', true, now()) returning id`;
    const restricted = await createSecretKey(w.ctx.deps, org, {
      mode: "live",
      scopes: ["*"],
      agentIds: [other[0]!.id],
    });
    const to = "+33612345000";
    // Every rule is broken at first.
    await updateOrganization(w.ctx.deps, org, {
      paidPlan: false,
      sipTrunkId: null,
      allowedCountries: ["BE"],
      callWindow: { ...WEEKDAYS_PARIS, days: [6, 7] },
      maxConcurrentCalls: 1,
      maxCallsPerHour: 1,
    });
    await updateAgent(w.ctx.deps, seed.agent.id, { active: false });
    await w.ctx.request("/api/v1/blocked-numbers", {
      method: "POST",
      key: seed.liveKey,
      json: { phone: to },
    });
    let writes = await placementWrites(w.ctx);
    const attempt = async (expected: string, opts: { key?: string; agentId?: string } = {}) => {
      const res = await placeCall(w.ctx, opts.key ?? seed.liveKey, {
        agentId: opts.agentId ?? seed.agent.id,
        to,
      });
      expect(await outcomeOf(res)).toBe(expected);
      if (res.status !== 201) expect(await placementWrites(w.ctx)).toEqual(writes);
      else writes = await placementWrites(w.ctx);
      return res;
    };
    // The environment's trunk applies to organizations without their own: remove it for this walk.
    const envTrunk = w.ctx.deps.env.LIVEKIT_SIP_TRUNK_ID;
    w.ctx.deps.env.LIVEKIT_SIP_TRUNK_ID = undefined;
    try {
      await attempt("404 not_found", { agentId: "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" });
      await attempt("403 agent_not_allowed", { key: restricted.key });
      await attempt("403 plan_required");
      await updateOrganization(w.ctx.deps, org, { paidPlan: true });
      await attempt("403 plan_minutes_exhausted");
      await updateOrganization(w.ctx.deps, org, { planMinutes: 100 });
      await attempt("503 carrier_unavailable");
    } finally {
      w.ctx.deps.env.LIVEKIT_SIP_TRUNK_ID = envTrunk;
    }
    await attempt("503 agent_unavailable");
    await updateAgent(w.ctx.deps, seed.agent.id, { active: true });
    await attempt("403 number_blocked");
    const listed = await (
      await w.ctx.request(`/api/v1/blocked-numbers?phone=${encodeURIComponent(to)}`, { key: seed.liveKey })
    ).json();
    await w.ctx.request(`/api/v1/blocked-numbers/${listed.data[0].id}`, {
      method: "DELETE",
      key: seed.liveKey,
    });
    await attempt("403 country_not_allowed");
    await updateOrganization(w.ctx.deps, org, { allowedCountries: ["BE", "FR"] });
    const closed = await attempt("403 outside_call_window");
    // Monday 10:00 in Paris; the window opens on Saturday 09:00 (08:00 UTC).
    expect((await closed.json()).error.message).toContain("2026-11-28T08:00:00.000Z");
    await updateOrganization(w.ctx.deps, org, { callWindow: WEEKDAYS_PARIS });

    const first = await attempt("201 ok");
    const call = await first.json();
    expect(call).toMatchObject({ status: "initiated", direction: "outbound", livemode: true, to });
    const concurrency = await attempt("429 concurrency_limit_reached");
    expect(Number(concurrency.headers.get("retry-after"))).toBeGreaterThan(0);
    // The first call ends: no call in progress, but one placed in the last 60 minutes.
    await w.ctx.deps.sql`update calls set status = 'completed' where id = ${call.id}`;
    writes = await placementWrites(w.ctx);
    clock.advance(10 * 60_000);
    const hourly = await attempt("429 hourly_limit_reached");
    // It leaves the hour 50 minutes from now.
    expect(Number(hourly.headers.get("retry-after"))).toBe(50 * 60);
    await updateOrganization(w.ctx.deps, org, { maxCallsPerHour: 2 });
    await attempt("201 ok");
  });

  test("without LiveKit there is no carrier, trunk or not: 503 carrier_unavailable", async () => {
    const bare = await startPhoneWorld({ env: { LIVEKIT_URL: "" } });
    try {
      const seed = await seedPhoneOrganization(bare.ctx, { sipTrunkId: "ST_own" });
      const res = await placeCall(bare.ctx, seed.liveKey, { agentId: seed.agent.id, to: freshNumber() });
      expect(await outcomeOf(res)).toBe("503 carrier_unavailable");
    } finally {
      await bare.close();
    }
  });
});

describe("what a 201 writes", () => {
  test("the call initiated with its minutes reserved (min(3,600 s, remaining plan)), its dial timer due now", async () => {
    clock.set(MONDAY_10_PARIS);
    const seed = await seedPhoneOrganization(w.ctx, {}, { planMinutes: 7 });
    const to = freshNumber();
    const res = await placeCall(w.ctx, seed.liveKey, {
      agentId: seed.agent.id,
      to,
      variables: { firstName: "Claire" },
    });
    expect(res.status).toBe(201);
    const call = await res.json();
    expect(call).toMatchObject({
      livemode: true,
      status: "initiated",
      direction: "outbound",
      to,
      agentId: seed.agent.id,
      startedAt: null,
      endedAt: null,
    });
    const [reservation] = await w.ctx.deps.sql`
      select reserved_minutes, max_seconds from minute_reservations where call_id = ${call.id}`;
    expect(reservation).toEqual({ reserved_minutes: 7, max_seconds: 420 });
    const timers = await w.ctx.deps.sql`
      select kind, due_at <= now() + interval '1 second' as due from timers where payload->>'callId' = ${call.id}`;
    expect([...timers]).toEqual([{ kind: "call.dial", due: true }]);

    const big = await seedPhoneOrganization(w.ctx, {}, { planMinutes: 10_000 });
    const long = await (
      await placeCall(w.ctx, big.liveKey, { agentId: big.agent.id, to: freshNumber() })
    ).json();
    const [r2] = await w.ctx.deps.sql`select max_seconds from minute_reservations where call_id = ${long.id}`;
    expect(r2!.max_seconds).toBe(3600);
  });
});

describe("test keys apply no calling rule", () => {
  test("blocked, foreign, outside the window, over the limits: a test call is simulated all the same", async () => {
    clock.set("2026-11-28T12:00:00.000Z"); // Saturday
    const seed = await seedPhoneOrganization(w.ctx, {
      allowedCountries: ["BE"],
      callWindow: WEEKDAYS_PARIS,
      maxConcurrentCalls: 1,
      maxCallsPerHour: 1,
    });
    const to = "+33612345001";
    await w.ctx.request("/api/v1/blocked-numbers", {
      method: "POST",
      key: seed.liveKey,
      json: { phone: to },
    });
    for (let i = 0; i < 3; i++) {
      const res = await placeCall(w.ctx, seed.testKey, { agentId: seed.agent.id, to });
      expect(res.status).toBe(201);
      expect((await res.json()).livemode).toBe(false);
    }
  });

  test("a test entry of the do-not-call list stops no live call", async () => {
    clock.set(MONDAY_10_PARIS);
    const seed = await seedPhoneOrganization(w.ctx);
    const to = freshNumber();
    await w.ctx.request("/api/v1/blocked-numbers", {
      method: "POST",
      key: seed.testKey,
      json: { phone: to },
    });
    expect(await outcomeOf(await placeCall(w.ctx, seed.liveKey, { agentId: seed.agent.id, to }))).toBe(
      "201 ok",
    );
  });
});

describe("countries from the numbering plan", () => {
  test.each([
    ["+14165550123", ["CA"], "201 ok"], // Toronto: +1, Canada
    ["+12125550123", ["CA"], "403 country_not_allowed"], // New York: +1, United States
    ["+12125550123", ["US"], "201 ok"],
    ["+3225551234", ["FR", "BE"], "201 ok"],
    ["+80012345678", ["FR"], "403 country_not_allowed"], // non-geographic: no country
    ["+80012345678", null, "201 ok"], // every country, and numbers of none
  ])("%s with allowedCountries %j: %s", async (to, allowedCountries, expected) => {
    clock.set(MONDAY_10_PARIS);
    const seed = await seedPhoneOrganization(w.ctx, {
      allowedCountries: allowedCountries as string[] | null,
    });
    const res = await placeCall(w.ctx, seed.liveKey, { agentId: seed.agent.id, to });
    expect(await outcomeOf(res)).toBe(expected);
    if (res.status === 403) expect((await res.json()).error.param).toBe("to");
  });
});

describe("the call window through the API", () => {
  // Fridays 22:00 to Saturdays 06:00 in New York.
  const FRIDAY_NIGHTS = { start: "22:00", end: "06:00", timeZone: "America/New_York", days: [5] };

  test("across midnight: open in the small hours of Saturday, closed after 06:00 and on other days", async () => {
    const seed = await seedPhoneOrganization(w.ctx, { callWindow: FRIDAY_NIGHTS });
    const call = () => placeCall(w.ctx, seed.liveKey, { agentId: seed.agent.id, to: freshNumber() });
    clock.set("2026-11-28T06:00:00.000Z"); // Saturday 01:00 in New York
    expect(await outcomeOf(await call())).toBe("201 ok");
    clock.set("2026-11-28T03:30:00.000Z"); // Friday 22:30
    expect(await outcomeOf(await call())).toBe("201 ok");
    clock.set("2026-11-28T12:00:00.000Z"); // Saturday 07:00
    const after = await call();
    expect(await outcomeOf(after)).toBe("403 outside_call_window");
    expect((await after.json()).error.message).toContain("next opens at 2026-12-05T03:00:00.000Z");
    clock.set("2026-11-27T08:00:00.000Z"); // Friday 03:00: Thursday's night, and Thursday is excluded
    const thursday = await call();
    expect(await outcomeOf(thursday)).toBe("403 outside_call_window");
    expect((await thursday.json()).error.message).toContain("next opens at 2026-11-28T03:00:00.000Z");
  });

  test("a scheduled call is judged at runAt (param runAt), and nothing else limits it yet", async () => {
    clock.set("2026-11-28T12:00:00.000Z"); // Saturday: closed now
    const seed = await seedPhoneOrganization(w.ctx, { callWindow: WEEKDAYS_PARIS, maxConcurrentCalls: 1 });
    await w.ctx.deps.sql`
      insert into calls (id, organization_id, livemode, status, agent_id, to_number, direction, created_at, placed_at,
        updated_at)
      values (${w.ctx.deps.ids.next("call")}, ${seed.org.id}, true, 'ongoing', ${seed.agent.id}, '+33600000000',
        'outbound', now(), now(), now())`;
    const monday = "2026-11-30T09:00:00.000Z"; // Monday 10:00 in Paris
    const ok = await placeCall(w.ctx, seed.liveKey, {
      agentId: seed.agent.id,
      to: freshNumber(),
      runAt: monday,
    });
    expect(await outcomeOf(ok)).toBe("201 ok");
    expect((await ok.json()).status).toBe("scheduled");
    const sunday = await placeCall(w.ctx, seed.liveKey, {
      agentId: seed.agent.id,
      to: freshNumber(),
      runAt: "2026-11-29T09:00:00.000Z",
    });
    expect(await outcomeOf(sunday)).toBe("403 outside_call_window");
    const error = (await sunday.json()).error;
    expect(error.param).toBe("runAt");
    expect(error.message).toContain("2026-11-30T08:00:00.000Z");
  });
});

describe("a runAt too far ahead", () => {
  test("is 400 invalid_request (param runAt) before the agent is looked up, writing nothing", async () => {
    clock.set(MONDAY_10_PARIS);
    const seed = await seedPhoneOrganization(w.ctx);
    const other = await seedPhoneOrganization(w.ctx);
    const restricted = await createSecretKey(w.ctx.deps, seed.org.id, {
      mode: "live",
      scopes: ["*"],
      agentIds: [seed.agent.id],
    });
    const tooFar = new Date(Date.parse(MONDAY_10_PARIS) + 367 * 86_400_000).toISOString();
    const writes = await placementWrites(w.ctx);
    // An unknown agent (404), another organization's (404), one the key may not use (403): the body first.
    for (const [key, agentId] of [
      [seed.liveKey, "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"],
      [seed.liveKey, other.agent.id],
      [restricted.key, other.agent.id],
      [seed.liveKey, seed.agent.id],
    ] as const) {
      const res = await placeCall(w.ctx, key, { agentId, to: freshNumber(), runAt: tooFar });
      expect(await outcomeOf(res)).toBe("400 invalid_request");
      expect((await res.json()).error).toMatchObject({
        param: "runAt",
        message: expect.stringContaining("366"),
      });
    }
    expect(await placementWrites(w.ctx)).toEqual(writes);
    // 366 days ahead is still accepted.
    const edge = new Date(Date.parse(MONDAY_10_PARIS) + 366 * 86_400_000).toISOString();
    const ok = await placeCall(w.ctx, seed.liveKey, {
      agentId: seed.agent.id,
      to: freshNumber(),
      runAt: edge,
    });
    expect(await outcomeOf(ok)).toBe("201 ok");
  });
});

describe("the carrier", () => {
  test("the organization's own trunk and caller number win over the environment's", async () => {
    clock.set(MONDAY_10_PARIS);
    const { carrierOf } = await import("../../src/services/admission.ts");
    const seed = await seedPhoneOrganization(w.ctx, { sipTrunkId: "ST_own", callerNumber: "+3225550000" });
    const [org] = await w.ctx.deps.sql`select * from organizations where id = ${seed.org.id}`;
    expect(carrierOf(w.ctx.deps, org as never)).toEqual({ trunkId: "ST_own", from: "+3225550000" });
    const plain = await seedPhoneOrganization(w.ctx);
    const [row] = await w.ctx.deps.sql`select * from organizations where id = ${plain.org.id}`;
    expect(carrierOf(w.ctx.deps, row as never)).toEqual({ trunkId: TRUNK, from: CALLER });
  });
});

describe("one number, however it is written", () => {
  test("a national prefix after the country code is dropped: the do-not-call list matches both spellings", async () => {
    clock.set(MONDAY_10_PARIS);
    const seed = await seedPhoneOrganization(w.ctx);
    const canonical = freshNumber(); // +336…, a French mobile
    const withPrefix = canonical.replace("+33", "+330");
    const blocked = await w.ctx.request("/api/v1/blocked-numbers", {
      method: "POST",
      key: seed.liveKey,
      json: { phone: withPrefix },
    });
    expect(blocked.status).toBe(201);
    const entry = await blocked.json();
    expect(entry.phone).toBe(canonical);
    const again = await w.ctx.request("/api/v1/blocked-numbers", {
      method: "POST",
      key: seed.liveKey,
      json: { phone: canonical },
    });
    expect(again.status).toBe(200);
    expect((await again.json()).id).toBe(entry.id);
    const listed = await (
      await w.ctx.request(`/api/v1/blocked-numbers?phone=${encodeURIComponent(withPrefix)}`, {
        key: seed.liveKey,
      })
    ).json();
    expect(listed.data.map((e: { id: string }) => e.id)).toEqual([entry.id]);

    const writes = await placementWrites(w.ctx);
    for (const to of [canonical, withPrefix]) {
      expect(await outcomeOf(await placeCall(w.ctx, seed.liveKey, { agentId: seed.agent.id, to }))).toBe(
        "403 number_blocked",
      );
    }
    expect(await placementWrites(w.ctx)).toEqual(writes);

    // A number not on the list is called in its one spelling; a fictitious one stays as written.
    const other = freshNumber();
    const placed = await placeCall(w.ctx, seed.liveKey, {
      agentId: seed.agent.id,
      to: other.replace("+33", "+330"),
    });
    expect(await outcomeOf(placed)).toBe("201 ok");
    expect((await placed.json()).to).toBe(other);
    const fictitious = await placeCall(w.ctx, seed.testKey, { agentId: seed.agent.id, to: "+15555550123" });
    expect((await fictitious.json()).to).toBe("+15555550123");
  });

  test("a number stored before numbers had one spelling (a task's, a campaign contact's) meets its entry when placed", async () => {
    const seed = await seedPhoneOrganization(w.ctx);
    const canonical = freshNumber();
    await w.ctx.request("/api/v1/blocked-numbers", {
      method: "POST",
      key: seed.liveKey,
      json: { phone: canonical },
    });
    const [read] = await readCallFactsOf(
      w.ctx.deps.sql,
      [{ organizationId: seed.org.id, to: canonical.replace("+33", "+330"), agentId: null, contactId: null }],
      monthOf(clock.now()),
    );
    expect(read!.facts!.blocked).toBe(true);
  });

  test("the one spelling of a number is its own: +49 00 30… is +49 30…, and stays so", () => {
    expect(canonicalNumber("+4900301234567")).toBe("+49301234567");
    expect(canonicalNumber("+86001801014803")).toBe(canonicalNumber(canonicalNumber("+86001801014803")));
    expect(canonicalNumber("+15555550123")).toBe("+15555550123");
  });

  test("a runAt that has already come places the call now, like none", async () => {
    clock.set(MONDAY_10_PARIS);
    const seed = await seedPhoneOrganization(w.ctx);
    const res = await placeCall(w.ctx, seed.liveKey, {
      agentId: seed.agent.id,
      to: freshNumber(),
      runAt: new Date(Date.parse(MONDAY_10_PARIS) - 86_400_000).toISOString(),
    });
    expect(await outcomeOf(res)).toBe("201 ok");
    const call = await res.json();
    expect(call.status).toBe("initiated");
    expect(call.taskId).toBeUndefined();
  });
});
