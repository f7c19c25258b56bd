import { afterAll, beforeAll, expect, test } from "bun:test";
import { type CallStatus, insertCall } from "../../src/db/calls.ts";
import { answerPhoneCall, completeLiveCall } from "../../src/db/liveCallMoves.ts";
import { insertReservation } from "../../src/db/minutes.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { fulfilled, inOneSharedTransaction } from "../helpers/sharedJobs.ts";

/**
 * The callee's answer and the call's completion, for the jobs of one shared transaction, are one
 * statement each (db/engine/gathered.ts): each job gets its own call, fenced on its status as alone.
 */

let ctx: TestContext;
let seeded: Awaited<ReturnType<typeof seedOrganization>>;

beforeAll(async () => {
  ctx = await createTestContext();
  seeded = await seedOrganization(ctx);
});
afterAll(() => ctx.close());

const created = new Date(Date.now() - 60_000);

async function phoneCall(id: string, status: CallStatus, maxSeconds: number) {
  await insertCall(ctx.deps.sql, {
    id,
    organization_id: seeded.org.id,
    livemode: true,
    status,
    agent_id: seeded.agent.id,
    to_number: "+14155550100",
    contact_id: null,
    campaign_id: null,
    direction: "outbound",
    variables: {},
    simulated_duration_seconds: null,
    language: "en",
    task_id: null,
    created_at: created,
  });
  await insertReservation(ctx.deps.sql, {
    call_id: id,
    organization_id: seeded.org.id,
    publishable_key_id: null,
    plan_charged: true,
    month: `${created.toISOString().slice(0, 7)}-01`,
    reserved_minutes: Math.ceil(maxSeconds / 60),
    max_seconds: maxSeconds,
    created_at: created,
  });
}

test("answers and completions of several calls in one transaction: each its own row, fenced on its status", async () => {
  await phoneCall("call_shared_a", "ringing", 600);
  await phoneCall("call_shared_b", "initiated", 600);
  await phoneCall("call_shared_c", "ringing", 120);
  const answeredAt = new Date(Date.now() - 30_000);
  const now = new Date();
  const answers = fulfilled(
    await inOneSharedTransaction(ctx.db.sql, [
      (tx) => answerPhoneCall(tx, "call_shared_a", answeredAt, now),
      (tx) => answerPhoneCall(tx, "call_shared_b", answeredAt, now),
      (tx) => answerPhoneCall(tx, "call_shared_c", new Date(answeredAt.getTime() + 1_000), now),
    ]),
  );
  expect(answers.map((r) => r && [r.id, r.status, r.started_at?.getTime()])).toEqual([
    ["call_shared_a", "ongoing", answeredAt.getTime()],
    null,
    ["call_shared_c", "ongoing", answeredAt.getTime() + 1_000],
  ]);
  expect(answers[0]!.updated_at.getTime()).toBe(now.getTime());

  // A hangs up 20 s after its answer; C's report comes long after its 120 s: it ends at its maximum.
  const completions = fulfilled(
    await inOneSharedTransaction(ctx.db.sql, [
      (tx) => completeLiveCall(tx, "call_shared_c", new Date(answeredAt.getTime() + 500_000), new Date()),
      (tx) => completeLiveCall(tx, "call_shared_b", new Date(), new Date()),
      (tx) => completeLiveCall(tx, "call_shared_a", new Date(answeredAt.getTime() + 20_000), new Date()),
    ]),
  );
  expect(completions.map((r) => r && [r.id, r.status, r.duration_seconds, r.results_reported])).toEqual([
    ["call_shared_c", "completed", 120, false],
    null,
    ["call_shared_a", "completed", 20, false],
  ]);
  // Moved once: the same again finds them completed.
  const again = fulfilled(
    await inOneSharedTransaction(ctx.db.sql, [
      (tx) => completeLiveCall(tx, "call_shared_a", new Date(), new Date()),
      (tx) => completeLiveCall(tx, "call_shared_c", new Date(), new Date()),
    ]),
  );
  expect(again).toEqual([null, null]);
});
