import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { expectApiError, outcomeOf } from "../helpers/errors.ts";
import { waitUntil } from "../helpers/wait.ts";
import { type Seed, type Server, seed, startServer } from "./support.ts";

/**
 * Webhooks over HTTP: endpoints made with the API, events delivered by the server process to a local
 * receiver, signed per Standard Webhooks, retried after a failure.
 */

interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** A receiver answering each path with scripted statuses (then 200), recording every request. */
function startReceiver() {
  const received: Received[] = [];
  const scripts = new Map<string, number[]>();
  const http = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      const path = new URL(req.url).pathname;
      received.push({ path, headers: Object.fromEntries(req.headers), body: await req.text() });
      return new Response(null, { status: scripts.get(path)?.shift() ?? 200 });
    },
  });
  return {
    url: (path: string) => `http://127.0.0.1:${http.port}${path}`,
    at: (path: string) => received.filter((r) => r.path === path),
    script: (path: string, statuses: number[]) => scripts.set(path, statuses),
    close: () => http.stop(true),
  };
}

let server: Server;
let s: Seed;
let receiver: ReturnType<typeof startReceiver>;
beforeAll(async () => {
  receiver = startReceiver();
  server = await startServer();
  s = await seed(server);
});
afterAll(async () => {
  await server.stop();
  await receiver.close();
});

async function createEndpoint(key: string, path: string, events?: string[]) {
  const res = await server.fetch("/api/v1/webhook-endpoints", {
    method: "POST",
    key,
    json: { url: receiver.url(path), ...(events ? { events } : {}) },
  });
  expect(res.status).toBe(201);
  return (await res.json()) as { id: string; url: string; events: string[]; secret: string };
}

/** Creates a contact and returns its contact.created event as the API lists it. */
async function contactCreated(key: string) {
  const contact = await (
    await server.fetch("/api/v1/contacts", { method: "POST", key, json: { phone: "+33612345678" } })
  ).json();
  const page = await (await server.fetch("/api/v1/events?type=contact.created&limit=100", { key })).json();
  return (page.data as { id: string; livemode: boolean; data: { id: string } }[]).find(
    (e) => e.data.id === contact.id,
  )!;
}

const signature = (secret: string, id: string, timestamp: string, body: string) =>
  `v1,${createHmac("sha256", Buffer.from(secret.slice("whsec_".length), "base64"))
    .update(`${id}.${timestamp}.${body}`)
    .digest("base64")}`;

const delivered = (path: string, eventId: string) =>
  waitUntil(`the delivery of ${eventId} to ${path}`, () => {
    const got = receiver.at(path).filter((r) => r.headers["webhook-id"] === eventId);
    return got.length > 0 && got;
  });

describe("webhook endpoints", () => {
  test("an event reaches its endpoint signed per Standard Webhooks, body equal to the listed event", async () => {
    const endpoint = await createEndpoint(s.liveKey, "/signed", ["contact.created"]);
    expect(endpoint.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const event = await contactCreated(s.liveKey);
    const [got] = await delivered("/signed", event.id);
    expect(JSON.parse(got!.body)).toEqual(event);
    const timestamp = got!.headers["webhook-timestamp"]!;
    expect(Math.abs(Number(timestamp) - Date.now() / 1000)).toBeLessThan(30);
    expect(got!.headers["webhook-signature"]).toBe(
      signature(endpoint.secret, event.id, timestamp, got!.body),
    );
    expect(got!.headers["content-type"]).toBe("application/json");
    // The secret is shown once: never listed, never logged.
    const listed = await (await server.fetch("/api/v1/webhook-endpoints", { key: s.liveKey })).json();
    expect(JSON.stringify(listed)).not.toContain("whsec_");
    expect(server.service.output()).not.toContain(endpoint.secret.slice("whsec_".length));
  });

  test("an endpoint made with a live key receives the events of both modes", async () => {
    await createEndpoint(s.liveKey, "/live", ["contact.created"]);
    const testEvent = await contactCreated(s.testKey);
    const liveEvent = await contactCreated(s.liveKey);
    expect(testEvent.livemode).toBe(false);
    expect(liveEvent.livemode).toBe(true);
    expect(JSON.parse((await delivered("/live", testEvent.id))[0]!.body).livemode).toBe(false);
    expect(JSON.parse((await delivered("/live", liveEvent.id))[0]!.body).livemode).toBe(true);
  });

  test("an endpoint gets only the types it subscribes to", async () => {
    await createEndpoint(s.liveKey, "/deletes", ["contact.deleted"]);
    const event = await contactCreated(s.liveKey);
    await server.fetch(`/api/v1/contacts/${event.data.id}`, { method: "DELETE", key: s.liveKey });
    const [got] = await waitUntil("the contact.deleted delivery", () => {
      const got = receiver.at("/deletes");
      return got.length > 0 && got;
    });
    expect(JSON.parse(got!.body)).toMatchObject({
      type: "contact.deleted",
      data: { id: event.data.id, deleted: true },
    });
    expect(receiver.at("/deletes").some((r) => r.headers["webhook-id"] === event.id)).toBe(false);
  });

  test("a failed attempt (500) is retried about 5 s later with the same event id", async () => {
    receiver.script("/flaky", [500]);
    await createEndpoint(s.liveKey, "/flaky", ["contact.created"]);
    const event = await contactCreated(s.liveKey);
    const attempts = await waitUntil("the retry, due 5 s after the failure", () => {
      const got = receiver.at("/flaky").filter((r) => r.headers["webhook-id"] === event.id);
      return got.length >= 2 && got;
    });
    const [first, second] = attempts.map((a) => Number(a.headers["webhook-timestamp"]));
    expect(second! - first!).toBeGreaterThanOrEqual(3);
    expect(attempts[1]!.body).toBe(attempts[0]!.body);
  });

  test("a deleted endpoint receives nothing more; deleting it again is 404", async () => {
    const endpoint = await createEndpoint(s.liveKey, "/gone", ["contact.created"]);
    const del = await server.fetch(`/api/v1/webhook-endpoints/${endpoint.id}`, {
      method: "DELETE",
      key: s.liveKey,
    });
    expect(await del.json()).toEqual({ id: endpoint.id, deleted: true });
    // A later event goes to the endpoints still there, and not to this one.
    const witness = await createEndpoint(s.liveKey, "/witness", ["contact.created"]);
    const event = await contactCreated(s.liveKey);
    await delivered("/witness", event.id);
    expect(receiver.at("/gone")).toEqual([]);
    const again = await server.fetch(`/api/v1/webhook-endpoints/${endpoint.id}`, {
      method: "DELETE",
      key: s.liveKey,
    });
    expect(await outcomeOf(again)).toBe("404 not_found");
    expect(witness.id).not.toBe(endpoint.id);
  });

  test("a URL of another scheme, or an unknown event type, is 400 invalid_request naming the field", async () => {
    const scheme = await server.fetch("/api/v1/webhook-endpoints", {
      method: "POST",
      key: s.liveKey,
      json: { url: "ftp://127.0.0.1/hook" },
    });
    await expectApiError(scheme, 400, "invalid_request", { param: "url" });
    const type = await server.fetch("/api/v1/webhook-endpoints", {
      method: "POST",
      key: s.liveKey,
      json: { url: receiver.url("/x"), events: ["contact.exploded"] },
    });
    expect(await outcomeOf(type)).toBe("400 invalid_request");
  });
});
