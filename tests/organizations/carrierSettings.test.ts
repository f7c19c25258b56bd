import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { admin, createAdminTestContext } from "../admin/support.ts";
import type { TestContext } from "../helpers/app.ts";

/** Carrier settings of an organization through the admin API: defaults, validation, PATCH and null. */

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createAdminTestContext();
});
afterAll(() => ctx.close());

const WINDOW = { start: "09:00", end: "20:00", timeZone: "Europe/Paris", days: [1, 2, 3, 4, 5] };

describe("carrier settings", () => {
  test("created with every setting, normalised (upper case, sorted, deduplicated, canonical zone)", async () => {
    const { status, body } = await admin(ctx, "POST", "/organizations", {
      json: {
        name: "Carrier",
        sipTrunkId: "ST_abc",
        callerNumber: "+33180000000",
        allowedCountries: ["fr", "BE", "FR"],
        callWindow: { start: "20:00", end: "02:00", timeZone: "america/new_york", days: [6, 5, 5] },
        maxConcurrentCalls: 1000,
        maxCallsPerHour: 100_000,
      },
    });
    expect(status).toBe(201);
    expect(body).toMatchObject({
      sipTrunkId: "ST_abc",
      callerNumber: "+33180000000",
      allowedCountries: ["BE", "FR"],
      callWindow: { start: "20:00", end: "02:00", timeZone: "America/New_York", days: [5, 6] },
      maxConcurrentCalls: 1000,
      maxCallsPerHour: 100_000,
    });
  });

  test("every ISO 3166-1 code is accepted, those without a numbering plan of their own too", async () => {
    const { status, body } = await admin(ctx, "POST", "/organizations", {
      json: { name: "Territories", allowedCountries: ["AQ", "BV", "HM", "TF", "UM", "PN", "gs", "FR"] },
    });
    expect(status).toBe(201);
    expect(body.allowedCountries).toEqual(["AQ", "BV", "FR", "GS", "HM", "PN", "TF", "UM"]);
  });

  test("days default to all seven; 24:00 ends a window at midnight", async () => {
    const { body } = await admin(ctx, "POST", "/organizations", {
      json: { name: "Days", callWindow: { start: "00:00", end: "24:00", timeZone: "UTC" } },
    });
    expect(body.callWindow).toEqual({
      start: "00:00",
      end: "24:00",
      timeZone: "UTC",
      days: [1, 2, 3, 4, 5, 6, 7],
    });
  });

  test("PATCH changes the settings given, null clears one, the others keep their value", async () => {
    const { body: org } = await admin(ctx, "POST", "/organizations", {
      json: { name: "Patch", sipTrunkId: "ST_x", allowedCountries: ["FR"], callWindow: WINDOW },
    });
    const changed = await admin(ctx, "PATCH", `/organizations/${org.id}`, {
      json: { maxConcurrentCalls: 2, callerNumber: "+3225551234" },
    });
    expect(changed.body).toEqual({ ...org, maxConcurrentCalls: 2, callerNumber: "+3225551234" });
    const cleared = await admin(ctx, "PATCH", `/organizations/${org.id}`, {
      json: { sipTrunkId: null, allowedCountries: null, callWindow: null, callerNumber: null },
    });
    expect(cleared.body).toEqual({
      ...changed.body,
      sipTrunkId: null,
      allowedCountries: null,
      callWindow: null,
      callerNumber: null,
    });
    const [row] = await ctx.deps
      .sql`select call_window, allowed_countries from organizations where id = ${org.id}`;
    expect(row).toEqual({ call_window: null, allowed_countries: null });
  });

  test.each([
    ["callerNumber", { callerNumber: "0612345678" }, "callerNumber"],
    ["callerNumber of no country calling code", { callerNumber: "+999123456789" }, "callerNumber"],
    ["callerNumber not a string", { callerNumber: 33612345678 }, "callerNumber"],
    ["an unknown country", { allowedCountries: ["FR", "ZZ"] }, "allowedCountries.1"],
    ["a country of three letters", { allowedCountries: ["FRA"] }, "allowedCountries.0"],
    // Regions the phone library numbers apart, which are no ISO 3166-1 codes.
    ["Kosovo's user-assigned XK", { allowedCountries: ["FR", "XK"] }, "allowedCountries.1"],
    ["Ascension's AC", { allowedCountries: ["AC"] }, "allowedCountries.0"],
    ["Tristan da Cunha's TA", { allowedCountries: ["BE", "ta"] }, "allowedCountries.1"],
    ["no country at all", { allowedCountries: [] }, "allowedCountries"],
    [
      "an unknown time zone",
      { callWindow: { ...WINDOW, timeZone: "Europe/Atlantis" } },
      "callWindow.timeZone",
    ],
    ["an offset for a time zone", { callWindow: { ...WINDOW, timeZone: "+01:00" } }, "callWindow.timeZone"],
    ["a start that is no time", { callWindow: { ...WINDOW, start: "9:00" } }, "callWindow.start"],
    ["24:00 as start", { callWindow: { ...WINDOW, start: "24:00" } }, "callWindow.start"],
    ["an end past midnight", { callWindow: { ...WINDOW, end: "24:30" } }, "callWindow.end"],
    ["end equal to start", { callWindow: { ...WINDOW, end: "09:00" } }, "callWindow.end"],
    ["every day excluded", { callWindow: { ...WINDOW, days: [] } }, "callWindow.days"],
    ["day 0", { callWindow: { ...WINDOW, days: [0, 1] } }, "callWindow.days.0"],
    ["day 8", { callWindow: { ...WINDOW, days: [8] } }, "callWindow.days.0"],
    ["an unknown field in the window", { callWindow: { ...WINDOW, until: "x" } }, "callWindow.until"],
    ["no time zone", { callWindow: { start: "09:00", end: "10:00" } }, "callWindow.timeZone"],
    ["maxConcurrentCalls 0", { maxConcurrentCalls: 0 }, "maxConcurrentCalls"],
    ["maxConcurrentCalls 1001", { maxConcurrentCalls: 1001 }, "maxConcurrentCalls"],
    ["maxCallsPerHour 100001", { maxCallsPerHour: 100_001 }, "maxCallsPerHour"],
    ["maxCallsPerHour 1.5", { maxCallsPerHour: 1.5 }, "maxCallsPerHour"],
    ["an empty trunk", { sipTrunkId: "  " }, "sipTrunkId"],
  ])("%s is 400 invalid_request with its param; nothing written", async (_name, fields, param) => {
    const [before] = await ctx.deps.sql`select count(*)::int as n from organizations`;
    const created = await admin(ctx, "POST", "/organizations", { json: { name: "Bad", ...fields } });
    expect({
      status: created.status,
      code: created.body.error.code,
      param: created.body.error.param,
    }).toEqual({
      status: 400,
      code: "invalid_request",
      param,
    });
    const [after] = await ctx.deps.sql`select count(*)::int as n from organizations`;
    expect(after!.n).toBe(before!.n);
    const { body: org } = await admin(ctx, "POST", "/organizations", { json: { name: "Good" } });
    const patched = await admin(ctx, "PATCH", `/organizations/${org.id}`, { json: fields });
    expect({ status: patched.status, param: patched.body.error.param }).toEqual({ status: 400, param });
    const read = await ctx.deps
      .sql`select max_concurrent_calls, call_window from organizations where id = ${org.id}`;
    expect(read[0]).toEqual({ max_concurrent_calls: 10, call_window: null });
  });
});
