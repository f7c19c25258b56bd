import { afterAll, expect, test } from "bun:test";
import { z } from "@hono/zod-openapi";
import { describeIssues } from "../../src/errors.ts";
import { createTestContext, seedOrganization } from "../helpers/app.ts";
import { expectApiError, repeatsField } from "../helpers/errors.ts";
import {
  concretePath,
  FULL_ENV,
  fetchDocument,
  jsonBodyOf,
  operations,
  type SchemaObject,
  secretKeyScopes,
} from "../helpers/openapi.ts";

/** A validation message names the field once, and `param` names it for programs. */

const ctx = await createTestContext({ env: FULL_ENV });
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

/** Values of the wrong type or out of range for most fields: each refusal names its field once. */
const BAD_VALUES: unknown[] = [12, -1, "", "x", true, {}, [], [1], { a: { b: 1 } }, "x".repeat(300)];

test("every operation's refusals of bad fields name the field once", async () => {
  const doc = await fetchDocument(ctx);
  const schemas = (doc.components?.schemas ?? {}) as Record<string, SchemaObject>;
  const resolve = (s: SchemaObject | undefined) => (s?.$ref ? schemas[s.$ref.split("/").pop()!] : s);
  const named: string[] = [];
  const problems: string[] = [];
  let address = 0;
  for (const o of operations(doc)) {
    const body = resolve(jsonBodyOf(o.op)?.schema);
    const properties = body?.properties ?? {};
    const fields = Object.keys(properties);
    if (fields.length === 0) continue;
    // The document's examples fill the other fields, so that the refusal is about the field tried.
    const base = Object.fromEntries(
      fields.flatMap((f) => {
        const example = properties[f]?.example ?? resolve(properties[f])?.example;
        return example === undefined ? [] : [[f, example]];
      }),
    );
    const auth = secretKeyScopes(o.op)
      ? `Bearer ${seed.liveKey}`
      : o.op.security?.length
        ? `Bearer ${FULL_ENV.ADMIN_TOKEN}`
        : undefined;
    for (const field of fields) {
      for (const value of BAD_VALUES) {
        address += 1;
        const res = await ctx.request(concretePath(o.path, o.op), {
          method: o.method.toUpperCase(),
          json: { ...base, [field]: value },
          remoteAddress: `10.9.${(address >> 8) & 255}.${address & 255}`,
          ...(auth ? { headers: { authorization: auth } } : {}),
        });
        if (res.status !== 400) continue;
        const { error } = (await res.json()) as { error: { message: string; param?: string } };
        if (!error.param) continue;
        named.push(error.param);
        if (repeatsField(error.message, error.param))
          problems.push(`${o.label} {${field}: ${JSON.stringify(value)}}: "${error.message}"`);
      }
    }
  }
  expect(problems).toEqual([]);
  // The sweep reached fields of many operations, nested ones too.
  expect(new Set(named).size).toBeGreaterThan(30);
  expect(named.some((p) => p.includes("."))).toBe(true);
});

test("the sweep's check finds a message that repeats its field", () => {
  expect(repeatsField("to: to must be a phone number", "to")).toBe(true);
  expect(repeatsField("to must be a phone number", "to")).toBe(false);
});
