import { afterAll, beforeAll, expect, test } from "bun:test";
import fc from "fast-check";
import { ManualClock } from "../../src/clock.ts";
import { createContact, deleteContact } from "../../src/services/contacts.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";

/**
 * Property: walking every page of a list while other requests insert and delete items returns every
 * item that existed when the walk began and was not deleted during it, exactly once, in order; never
 * an item created during the walk; never an item outside the filter. Random initial lists, random
 * inserts and deletes between pages, random limits, random filters, timestamps often equal.
 * Runs against the real database through the HTTP route and the list helper.
 */

const PHONES = ["+33600000001", "+33600000002", "+33600000003"];
const EMAILS = ["ana@example.com", "Bob@Example.com"];

type Filter = { phone?: number; email?: number };

const item = fc.record({
  phone: fc.integer({ min: 0, max: PHONES.length - 1 }),
  email: fc.option(fc.integer({ min: 0, max: EMAILS.length - 1 }), { nil: null }),
  // 0 keeps the clock still, so equal created_at values are frequent.
  tick: fc.constantFrom(0, 0, 0, 1, 2),
});
const op = fc.oneof(
  item.map((i) => ({ kind: "insert" as const, ...i })),
  fc.nat().map((pick) => ({ kind: "delete" as const, pick })),
);
const scenario = fc.record({
  initial: fc.array(item, { maxLength: 30 }),
  // Operations run after each page, in turn from this list.
  between: fc.array(fc.array(op, { maxLength: 4 }), { minLength: 1, maxLength: 6 }),
  limits: fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 4 }),
  filter: fc.constantFrom<Filter>({}, { phone: 0 }, { phone: 2 }, { email: 1 }, { phone: 1, email: 0 }),
});

let ctx: TestContext;
let seed: Awaited<ReturnType<typeof seedOrganization>>;
const clock = new ManualClock("2026-11-21T09:30:00.000Z");

beforeAll(async () => {
  ctx = await createTestContext({ clock });
  seed = await seedOrganization(ctx);
});
afterAll(() => ctx.close());

function matches(f: Filter, c: { phone: string; email: string | null }) {
  return (
    (f.phone === undefined || c.phone === PHONES[f.phone]) &&
    (f.email === undefined || c.email?.toLowerCase() === EMAILS[f.email]!.toLowerCase())
  );
}

test("a walk under concurrent inserts and deletes returns every pre-existing item exactly once", async () => {
  const actor = { organizationId: seed.org.id, livemode: false };
  const create = async (i: { phone: number; email: number | null; tick: number }) => {
    clock.advance(i.tick);
    return createContact({ ...ctx.deps, clock }, actor, {
      phone: PHONES[i.phone]!,
      email: i.email === null ? null : EMAILS[i.email]!,
    });
  };

  await fc.assert(
    fc.asyncProperty(scenario, async (s) => {
      await ctx.deps.sql`delete from contacts where organization_id = ${seed.org.id}`;
      const alive = new Map<string, { phone: string; email: string | null; createdAt: string }>();
      for (const i of s.initial) {
        const c = await create(i);
        alive.set(c.id, c);
      }
      const before = new Map(alive);
      // The order the walk must follow: created_at desc, then id desc.
      const expectedOrder = [...before.entries()]
        .filter(([, c]) => matches(s.filter, c))
        .sort(([ia, a], [ib, b]) =>
          a.createdAt === b.createdAt ? (ia < ib ? 1 : -1) : a.createdAt < b.createdAt ? 1 : -1,
        )
        .map(([id]) => id);
      const deletedDuringWalk = new Set<string>();
      const query = new URLSearchParams();
      if (s.filter.phone !== undefined) query.set("phone", PHONES[s.filter.phone]!);
      if (s.filter.email !== undefined) query.set("email", EMAILS[s.filter.email]!.toUpperCase());

      const seen: string[] = [];
      let cursor: string | undefined;
      for (let page = 0; ; page++) {
        expect(page).toBeLessThan(200);
        const limit = s.limits[page % s.limits.length]!;
        query.set("limit", String(limit));
        if (cursor) query.set("starting_after", cursor);
        const res = await ctx.request(`/api/v1/contacts?${query}`, { key: seed.testKey });
        const body = await res.json();
        expect(res.status).toBe(200);
        expect(body.data.length).toBeLessThanOrEqual(limit);
        if (body.has_more) expect(body.data.length).toBe(limit);
        seen.push(...body.data.map((c: { id: string }) => c.id));
        if (!body.has_more) break;
        cursor = body.data[body.data.length - 1].id as string;

        // Other clients write between two pages. The cursor item itself is left alone: deleting it
        // makes the next page invalid_cursor by design (tested in cursor.errors.test.ts).
        for (const o of s.between[page % s.between.length]!) {
          if (o.kind === "insert") {
            const c = await create(o);
            alive.set(c.id, c);
          } else {
            const candidates = [...alive.keys()].filter((id) => id !== cursor);
            if (candidates.length === 0) continue;
            const id = candidates[o.pick % candidates.length]!;
            await deleteContact(ctx.deps, actor, id);
            alive.delete(id);
            deletedDuringWalk.add(id);
          }
        }
      }

      // Exactly once, only pre-existing items of the filter, in order; all survivors present.
      expect(new Set(seen).size).toBe(seen.length);
      const expected = new Set(expectedOrder);
      for (const id of seen) expect(expected.has(id)).toBe(true);
      expect(seen).toEqual(expectedOrder.filter((id) => seen.includes(id)));
      const survivors = expectedOrder.filter((id) => !deletedDuringWalk.has(id));
      for (const id of survivors) expect(seen).toContain(id);
    }),
    { numRuns: 60 },
  );
});
