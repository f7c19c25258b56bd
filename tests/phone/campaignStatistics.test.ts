import { afterAll, beforeAll, expect, test } from "bun:test";
import { BULK_CHANGE_ROWS, scheduleHousekeeping } from "../../src/services/housekeeping.ts";
import { phones } from "../campaigns/support.ts";
import { type PhoneWorld, seedPhoneOrganization, startPhoneWorld } from "./support.ts";

/**
 * A live campaign of many contacts is a bulk change: its transaction brings the statistics check
 * forward (services/housekeeping.ts), so plans learn of its rows at once. No timer runner here, so the
 * check stays where the campaign put it.
 */

let w: PhoneWorld;
beforeAll(async () => {
  w = await startPhoneWorld();
  await scheduleHousekeeping(w.ctx.deps);
}, 60_000);
afterAll(() => w.close());

const statisticsDue = async () =>
  (
    await w.ctx.deps.sql<{ due_at: Date }[]>`
      select due_at from timers where kind = 'statistics' and status = 'pending'`
  )[0]!.due_at.getTime();

test(`a live campaign of ${BULK_CHANGE_ROWS} contacts or more brings the statistics check forward; a smaller one does not`, async () => {
  const seed = await seedPhoneOrganization(w.ctx);
  const create = async (contacts: number) => {
    const res = await w.ctx.request("/api/v1/campaigns", {
      method: "POST",
      key: seed.liveKey,
      json: { name: `${contacts} contacts`, agentId: seed.agent.id, contacts: phones(contacts) },
    });
    expect(res.status, await res.clone().text()).toBe(201);
  };
  await w.ctx.deps.sql`update timers set due_at = now() + interval '1 minute' where kind = 'statistics'`;
  const later = await statisticsDue();
  await create(BULK_CHANGE_ROWS - 1);
  expect(await statisticsDue()).toBe(later);
  await create(BULK_CHANGE_ROWS);
  expect(await statisticsDue()).toBeLessThanOrEqual(Date.now());
});
