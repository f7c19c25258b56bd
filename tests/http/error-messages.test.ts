import { afterAll, expect, test } from "bun:test";
import { z } from "@hono/zod-openapi";
import { describeIssues } from "../../src/errors.ts";
import { createTestContext, seedOrganization } from "../helpers/app.ts";
import { expectApiError } from "../helpers/errors.ts";

/** A validation message names the field once, and `param` names it for programs. */

const ctx = await createTestContext();
afterAll(() => ctx.close());
const seed = await seedOrganization(ctx);

test("a message that starts with its field is kept as written", async () => {
  const res = await ctx.request("/api/v1/calls", {
    method: "POST",
    key: seed.testKey,
    json: { agentId: seed.agent.id, to: "0612345678" },
  });
  const body = await expectApiError(res, 400, "invalid_request", { param: "to" });
  expect(body.error.message).toBe("to must be a phone number in E.164 format, such as +33612345678");
});

test("a message about a field is prefixed with the field, without a colon", async () => {
  const res = await ctx.request("/api/v1/contacts", {
    method: "POST",
    key: seed.testKey,
    json: { phone: "12" },
  });
  const body = await expectApiError(res, 400, "invalid_request", { param: "phone" });
  expect(body.error.message).toBe("phone must be a phone number in E.164 format, such as +33612345678");
});

test("nested fields are named by their path; zod's own sentences follow a colon", () => {
  const schema = z.object({
    contacts: z.array(z.object({ phone: z.string().regex(/^\+/, { message: "must start with +" }) })),
    count: z.number(),
  });
  const nested = schema.safeParse({ contacts: [{ phone: "33" }], count: 1 });
  expect(describeIssues(nested.error!.issues)).toEqual({
    message: "contacts.0.phone must start with +",
    param: "contacts.0.phone",
  });
  const typed = schema.safeParse({ contacts: [], count: "1" });
  expect(describeIssues(typed.error!.issues)).toEqual({
    message: "count: Invalid input: expected number, received string",
    param: "count",
  });
  const whole = z.string().safeParse(1);
  expect(describeIssues(whole.error!.issues)).toEqual({
    message: "Invalid input: expected string, received number",
  });
});
