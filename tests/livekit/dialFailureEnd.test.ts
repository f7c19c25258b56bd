import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { ServerError, SipCallError } from "livekit-server-sdk";
import { LiveKitError } from "../../src/livekit/errors.ts";
import { dialFailureEnd, isRingingTimeout } from "../../src/livekit/sip.ts";

/**
 * The mapping from a failed dial to the end of the call, on errors built the way the SDK builds
 * them (a Twirp error; SipCallError when its metadata carries `sip_status_code`).
 */

function sipError(code: number, twirp = "resource_exhausted", status = 429): SipCallError {
  return SipCallError.fromServerError(
    new ServerError("Too Many Requests", `sip status ${code}: X`, status, twirp, {
      sip_status_code: String(code),
      sip_status: "X",
    }),
  );
}

describe("dialFailureEnd", () => {
  test("busy: 486, 600, 603", () => {
    for (const code of [486, 600, 603]) {
      expect(dialFailureEnd(sipError(code))).toEqual({ status: "busy", outcome: null, sipStatusCode: code });
    }
  });

  test("no answer: 408, 480, 487", () => {
    for (const code of [408, 480, 487]) {
      expect(dialFailureEnd(sipError(code))).toEqual({
        status: "no_answer",
        outcome: null,
        sipStatusCode: code,
      });
    }
  });

  test("any other SIP status: failed, with the code as outcome", () => {
    expect(dialFailureEnd(sipError(404, "not_found", 404))).toEqual({
      status: "failed",
      outcome: "404",
      sipStatusCode: 404,
    });
    expect(dialFailureEnd(sipError(503, "failed_precondition", 412))).toEqual({
      status: "failed",
      outcome: "503",
      sipStatusCode: 503,
    });
  });

  test.each<[string, string, string, number]>([
    ["LiveKit SIP today", "canceled", "sip request timed out", 408],
    ["LiveKit SIP of early 2026", "deadline_exceeded", "sip request timed out", 408],
    [
      "the ringing timeout ending while the INVITE is sent",
      "deadline_exceeded",
      "context deadline exceeded",
      408,
    ],
    ["LiveKit's own deadline for the request", "deadline_exceeded", "request timed out", 408],
    ["LiveKit SIP before 2026", "canceled", "canceled", 408],
    [
      "a transaction that rang and never got a final answer",
      "canceled",
      "transaction failed to complete (2 intermediate responses)",
      408,
    ],
  ])("the ringing timeout, %s (Twirp %s, %p, no SIP status): no answer", (_name, code, msg, status) => {
    const err = new ServerError("Request Timeout", msg, status, code);
    expect(dialFailureEnd(err)).toEqual({ status: "no_answer", outcome: null, sipStatusCode: null });
    expect(isRingingTimeout(LiveKitError.from("CreateSIPParticipant", err))).toBe(true);
  });

  test.each<[string, string]>([
    ["canceled", "service shutting down"],
    // The carrier never answered at all (no provisional answer): the trunk failed, nobody rang.
    ["canceled", "transaction failed to complete (0 intermediate responses)"],
    ["canceled", "call already closed"],
    ["aborted", "sip request timed out"],
  ])("not the ringing timeout: Twirp %s, %p → failed with the code", (code, msg) => {
    const err = new ServerError("Request Timeout", msg, 408, code);
    expect(dialFailureEnd(err)).toEqual({ status: "failed", outcome: code, sipStatusCode: null });
  });

  test("a SIP status wins over the Twirp code: 504 Server Time-out (deadline_exceeded) is failed 504", () => {
    expect(dialFailureEnd(sipError(504, "deadline_exceeded", 408))).toEqual({
      status: "failed",
      outcome: "504",
      sipStatusCode: 504,
    });
  });

  test("errors without SIP status: failed with the Twirp code, or http_<status> when there is none", () => {
    expect(dialFailureEnd(new ServerError("Service Unavailable", "x", 503, "unavailable"))).toEqual({
      status: "failed",
      outcome: "unavailable",
      sipStatusCode: null,
    });
    expect(dialFailureEnd(new ServerError("Bad Gateway", "<html>", 502, undefined))).toEqual({
      status: "failed",
      outcome: "http_502",
      sipStatusCode: null,
    });
    // Metadata that is not a SIP status is not one.
    const odd = new ServerError("Bad Request", "x", 400, "invalid_argument", { sip_status_code: "abc" });
    expect(dialFailureEnd(odd)).toEqual({
      status: "failed",
      outcome: "invalid_argument",
      sipStatusCode: null,
    });
  });

  test("local failures: timeout, network error, unreadable answer, anything else", () => {
    const timeout = new DOMException("The operation timed out.", "TimeoutError");
    expect(dialFailureEnd(timeout)).toMatchObject({ status: "failed", outcome: "timeout" });
    const reset = Object.assign(new TypeError("The socket connection was closed unexpectedly"), {
      code: "ECONNRESET",
    });
    expect(dialFailureEnd(reset)).toMatchObject({ status: "failed", outcome: "network_error" });
    expect(dialFailureEnd(new SyntaxError("Unexpected token <"))).toMatchObject({
      outcome: "invalid_answer",
    });
    expect(dialFailureEnd(new Error("?"))).toMatchObject({ status: "failed", outcome: "unknown" });
    expect(dialFailureEnd("a string")).toMatchObject({ status: "failed", outcome: "unknown" });
    expect(dialFailureEnd(undefined)).toMatchObject({ status: "failed", outcome: "unknown" });
  });

  test("a LiveKitError is read as it is (the same answer as for the SDK's error it came from)", () => {
    const sdk = sipError(486);
    expect(dialFailureEnd(LiveKitError.from("CreateSIPParticipant", sdk))).toEqual(dialFailureEnd(sdk));
  });

  test("every SIP failure status maps to exactly one end, consistent with the rules", () => {
    fc.assert(
      fc.property(fc.integer({ min: 300, max: 699 }), (code) => {
        const end = dialFailureEnd(sipError(code));
        expect(end.sipStatusCode).toBe(code);
        if ([486, 600, 603].includes(code)) expect(end).toMatchObject({ status: "busy", outcome: null });
        else if ([408, 480, 487].includes(code))
          expect(end).toMatchObject({ status: "no_answer", outcome: null });
        else expect(end).toMatchObject({ status: "failed", outcome: String(code) });
      }),
    );
  });

  test("any error at all ends the call with a status, and a failed call always has an outcome", () => {
    const anyError = fc.oneof(
      fc.anything(),
      fc
        .record({
          status: fc.integer({ min: 400, max: 599 }),
          code: fc.option(fc.string()),
          msg: fc.string(),
        })
        .map(({ status, code, msg }) => new ServerError("x", msg, status, code ?? undefined)),
      fc.string().map((m) => new Error(m)),
    );
    fc.assert(
      fc.property(anyError, (err) => {
        const end = dialFailureEnd(err);
        expect(["busy", "no_answer", "failed"]).toContain(end.status);
        if (end.status === "failed") expect(end.outcome.length).toBeGreaterThan(0);
        else expect(end.outcome).toBeNull();
      }),
    );
  });
});
