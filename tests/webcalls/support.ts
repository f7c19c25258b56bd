import type { Clock } from "../../src/clock.ts";
import { createTestContext, seedOrganization, type TestContext } from "../helpers/app.ts";
import { type FakeCaptcha, startFakeCaptcha } from "../helpers/fakeCaptcha.ts";
import { type FakeLiveKit, startFakeLiveKit } from "../helpers/fakeLivekit.ts";

/** What the web-call tests share: an app wired to a fake media server and a fake bot check. */
export interface WebCallWorld {
  ctx: TestContext;
  liveKit: FakeLiveKit;
  captcha: FakeCaptcha;
  close(): Promise<void>;
}

export const SHOP = "https://shop.example.com";

export async function startWorld(
  opts: { clock?: Clock; timers?: boolean; env?: Record<string, string>; liveKit?: boolean } = {},
): Promise<WebCallWorld> {
  const liveKit = await startFakeLiveKit();
  const captcha = await startFakeCaptcha();
  const ctx = await createTestContext({
    ...(opts.clock ? { clock: opts.clock } : {}),
    ...(opts.timers ? { timers: true } : {}),
    env: { ...captcha.env, ...(opts.liveKit === false ? {} : liveKit.env), ...opts.env },
  });
  return {
    ctx,
    liveKit,
    captcha,
    close: async () => {
      await ctx.close();
      await liveKit.close();
      await captcha.close();
    },
  };
}

let addresses = 0;
/** A client address no other request of this process used: each test gets its own rate-limit budget. */
export function freshAddress(): string {
  addresses += 1;
  return `198.51.${(addresses >> 8) & 255}.${addresses & 255}`;
}

/** POST /api/v1/web-calls as a page would: JSON body, an Origin (unless null), a client address. */
export function startCall(
  ctx: TestContext,
  json: unknown,
  opts: { origin?: string | null; address?: string; headers?: Record<string, string>; query?: string } = {},
): Promise<Response> {
  const headers: Record<string, string> = { ...opts.headers };
  const origin = opts.origin === undefined ? SHOP : opts.origin;
  if (origin !== null) headers.origin = origin;
  return ctx.request(`/api/v1/web-calls${opts.query ?? ""}`, {
    method: "POST",
    json,
    headers,
    remoteAddress: opts.address ?? freshAddress(),
  });
}

export async function mintToken(
  ctx: TestContext,
  key: string,
  agentId: string,
  variables: Record<string, unknown> = {},
): Promise<string> {
  const res = await ctx.request("/api/v1/web-call-sessions", {
    method: "POST",
    key,
    json: { agentId, variables },
  });
  if (res.status !== 201) throw new Error(`mint answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { token: string }).token;
}

/** Decodes a JWT's payload (no verification: the fake media server verifies what it receives). */
export function jwtClaims(jwt: string): Record<string, unknown> {
  const part = jwt.split(".")[1]!;
  return JSON.parse(Buffer.from(part, "base64url").toString("utf8"));
}

export type Seed = Awaited<ReturnType<typeof seedOrganization>>;
export { seedOrganization };
