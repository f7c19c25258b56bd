import { describe, expect, test } from "bun:test";
import { expectApiError, outcomeOf } from "../helpers/errors.ts";

/** The error checker the suite relies on refuses every way an answer can miss the envelope. */

const ID = "req_01JD8Y3M6W9Q2T4V5X7Z8A9B0C";

function answer(
  status: number,
  body: unknown,
  headers: Record<string, string> = { "content-type": "application/json", "x-request-id": ID },
): Response {
  return new Response(typeof body === "string" ? body : JSON.stringify(body), { status, headers });
}

const good = (error: Record<string, unknown> = {}) => ({
  error: {
    code: "invalid_query",
    message: "limit must be between 1 and 100",
    param: "limit",
    requestId: ID,
    ...error,
  },
});

describe("expectApiError", () => {
  test("returns the body of an answer that matches, and leaves the response readable", async () => {
    const res = answer(400, good());
    expect(await expectApiError(res, 400, "invalid_query", { param: "limit" })).toEqual(good());
    expect(await res.json()).toEqual(good());
  });

  test("accepts one of several statuses and codes", async () => {
    const res = answer(405, good({ code: "method_not_allowed", param: undefined }));
    await expectApiError(res, [404, 405], ["not_found", "method_not_allowed"]);
  });

  test.each([
    ["another status", answer(422, good()), "status 422"],
    ["another code", answer(400, good({ code: "invalid_request" })), "code invalid_request"],
    ["another param", answer(400, good({ param: "cursor" })), "param cursor"],
    ["a param when none is expected", answer(400, good()), "param limit"],
    ["no JSON content type", answer(400, good(), { "x-request-id": ID }), "not JSON"],
    ["a body that is not JSON", answer(400, "Bad Request"), "unparsable body"],
    ["a field beside error", answer(400, { ...good(), detail: "x" }), "top-level keys"],
    ["a field inside error", answer(400, good({ stack: "x" })), "unexpected fields stack"],
    ["an empty message", answer(400, good({ message: "" })), "no message"],
    ["a param that is not a string", answer(400, good({ param: 3 })), "param not a string"],
    [
      "a requestId other than the header",
      answer(400, good({ requestId: "req_01JD8Y3M6W9Q2T4V5X7Z8A9B0D" })),
      "requestId",
    ],
    [
      "a requestId that is not a req_ ULID",
      answer(400, good({ requestId: "abc" }), { "content-type": "application/json", "x-request-id": "abc" }),
      "requestId",
    ],
    [
      "a stack trace",
      answer(400, good({ message: "boom\n    at handler (src/routes/x.ts:3:9)" })),
      "stack trace",
    ],
  ])("refuses %s", async (_name, res, problem) => {
    const expected = { param: "limit" as string | undefined };
    if (problem.startsWith("param limit")) expected.param = undefined;
    const err = await expectApiError(res, 400, "invalid_query", expected).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message).toContain(problem);
  });

  test("names the label in its failure", async () => {
    const err = await expectApiError(answer(400, good()), 404, "not_found", { label: "GET /x" }).catch(
      (e: Error) => e,
    );
    expect(String(err)).toContain("GET /x: not the expected error");
  });
});

describe("outcomeOf", () => {
  test("labels a success and a refusal", async () => {
    expect(await outcomeOf(new Response("{}", { status: 201 }))).toBe("201 ok");
    expect(await outcomeOf(answer(400, good()))).toBe("400 invalid_query");
  });

  test("refuses a refusal outside the envelope", async () => {
    await expect(outcomeOf(answer(429, { error: "slow down" }))).rejects.toThrow("bad error envelope");
  });
});
