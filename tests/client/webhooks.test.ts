import { afterAll, beforeAll, expect, test } from "bun:test";
import { type VoiceService, verifyWebhook, WebhookVerificationError } from "voice-service/client";
import { waitUntil } from "../helpers/wait.ts";
import {
  expectedSignature,
  type Received,
  startWebhookReceiver,
  type WebhookReceiver,
} from "../helpers/webhookReceiver.ts";
import { type ClientWorld, rejection, startClientWorld } from "./support.ts";

/**
 * verifyWebhook on real deliveries: the server signs and sends them to a local receiver, the client
 * verifies what arrived, byte for byte, for contacts, calls and campaigns. Tampered bodies, other
 * secrets, old or missing timestamps and signatures are refused; after a secret rotation both secrets
 * verify.
 */

let world: ClientWorld;
let receiver: WebhookReceiver;
let client: VoiceService;
let endpoint: { id: string; secret: string };
beforeAll(async () => {
  world = await startClientWorld({ timers: true });
  receiver = startWebhookReceiver();
  client = world.client(world.seed.testKey);
  endpoint = await client.webhookEndpoints.create({
    url: receiver.url("/hook"),
    events: ["contact.created"],
  });
});
afterAll(async () => {
  receiver.stop();
  await world.close();
});

/** Creates a contact and returns the delivery of its `contact.created` event. */
async function deliveryOfNewContact(): Promise<{ contactId: string; delivery: Received }> {
  const contact = await client.contacts.create({ phone: "+33612345678" });
  const delivery = await waitUntil("the delivery", () =>
    receiver.at("/hook").find((r) => r.body.includes(contact.id)),
  );
  return { contactId: contact.id, delivery };
}

const refusedWith = async (promise: Promise<unknown>) => {
  const err = await rejection(promise);
  expect(err).toBeInstanceOf(WebhookVerificationError);
  return (err as Error).message;
};

test("a real delivery verifies and gives back the typed event", async () => {
  const { contactId, delivery } = await deliveryOfNewContact();
  const event = await verifyWebhook(endpoint.secret, delivery.headers, delivery.body);
  expect(event.type).toBe("contact.created");
  if (event.type !== "contact.created") throw new Error("unreachable");
  expect(event.data.id).toBe(contactId);
  expect(event.data.phone).toBe("+33612345678");
  expect(event.id).toBe(delivery.headers["webhook-id"]!);
  // The same from a Headers object and from the raw bytes.
  const bytes = new TextEncoder().encode(delivery.body);
  expect(await verifyWebhook(endpoint.secret, new Headers(delivery.headers), bytes)).toEqual(event);
});

test("a tampered body, another secret, a missing header are refused", async () => {
  const { delivery } = await deliveryOfNewContact();
  const tampered = delivery.body.replace("+33612345678", "+33612345670");
  expect(tampered).not.toBe(delivery.body);
  await refusedWith(verifyWebhook(endpoint.secret, delivery.headers, tampered));
  const other = `whsec_${btoa("another secret of 32 bytes......")}`;
  await refusedWith(verifyWebhook(other, delivery.headers, delivery.body));
  for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
    const { [name]: _, ...rest } = delivery.headers;
    expect(await refusedWith(verifyWebhook(endpoint.secret, rest, delivery.body))).toContain("missing");
  }
  // Another id under the same signature: the id is part of what is signed.
  const moved = { ...delivery.headers, "webhook-id": "evt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" };
  await refusedWith(verifyWebhook(endpoint.secret, moved, delivery.body));
});

test("a timestamp more than 5 minutes from now is refused, even correctly signed", async () => {
  const { delivery } = await deliveryOfNewContact();
  const sentAt = Number(delivery.headers["webhook-timestamp"]) * 1000;
  // The delivery itself, verified 4 minutes later: accepted; 6 minutes later (a replay): refused.
  await verifyWebhook(endpoint.secret, delivery.headers, delivery.body, {
    now: new Date(sentAt + 4 * 60_000),
  });
  const late = verifyWebhook(endpoint.secret, delivery.headers, delivery.body, {
    now: new Date(sentAt + 6 * 60_000),
  });
  expect(await refusedWith(late)).toContain("timestamp");
  // Re-signed with an old timestamp by someone holding the secret: still too old.
  const old = String(Math.floor(Date.now() / 1000) - 10 * 60);
  const id = delivery.headers["webhook-id"]!;
  const headers = {
    "webhook-id": id,
    "webhook-timestamp": old,
    "webhook-signature": expectedSignature(endpoint.secret, id, old, delivery.body),
  };
  expect(await refusedWith(verifyWebhook(endpoint.secret, headers, delivery.body))).toContain("timestamp");
});

test("after a rotation a delivery carries two signatures; the old and the new secret both verify", async () => {
  const rotated = await client.webhookEndpoints.rotateSecret(endpoint.id);
  const { delivery } = await deliveryOfNewContact();
  expect(delivery.headers["webhook-signature"]!.split(" ")).toHaveLength(2);
  const fromNew = await verifyWebhook(rotated.secret, delivery.headers, delivery.body);
  const fromOld = await verifyWebhook(endpoint.secret, delivery.headers, delivery.body);
  expect(fromOld).toEqual(fromNew);
  await refusedWith(verifyWebhook(`whsec_${btoa("x".repeat(32))}`, delivery.headers, delivery.body));
});

test("a secret that is not whsec_… is a programming error, not a refusal", async () => {
  const { delivery } = await deliveryOfNewContact();
  const err = await rejection(verifyWebhook("not-a-secret", delivery.headers, delivery.body));
  expect(err).toBeInstanceOf(TypeError);
});

test("a campaign's and its call's real deliveries verify, typed, and order by data.updatedAt", async () => {
  const other = await client.webhookEndpoints.create({
    url: receiver.url("/activity"),
    events: [
      "call.started",
      "call.ended",
      "call.transcript_ready",
      "call.analysis_ready",
      "campaign.started",
      "campaign.completed",
    ],
  });
  const campaign = await client.campaigns.create({
    name: "Deliveries",
    agentId: world.seed.agent.id,
    contacts: [{ phone: "+33612345678" }],
  });
  const deliveries = await waitUntil("the campaign's and its call's six deliveries", () => {
    const got = receiver.at("/activity");
    return got.length >= 6 && got;
  });
  const events = await Promise.all(deliveries.map((d) => verifyWebhook(other.secret, d.headers, d.body)));
  expect(events.map((e) => e.type).sort()).toEqual([
    "call.analysis_ready",
    "call.ended",
    "call.started",
    "call.transcript_ready",
    "campaign.completed",
    "campaign.started",
  ]);
  const callTimes: [string, string][] = [];
  for (const event of events) {
    // The union narrows on `type`: each event's data is its object's type.
    switch (event.type) {
      case "campaign.started":
      case "campaign.completed":
        expect(event.data.id).toBe(campaign.id);
        expect(event.data.progress.total).toBe(1);
        break;
      case "call.transcript_ready":
        expect(event.data.segments.length).toBeGreaterThan(0);
        break;
      case "call.started":
      case "call.ended":
      case "call.analysis_ready":
        expect(event.data.campaignId).toBe(campaign.id);
        callTimes.push([event.data.updatedAt, event.type]);
        break;
      default:
        throw new Error(`unexpected ${event.type}`);
    }
  }
  // Whatever order they arrived in, the call's events sort by updatedAt into the order they happened.
  expect(callTimes.sort(([a], [b]) => a.localeCompare(b)).map(([, type]) => type)).toEqual([
    "call.started",
    "call.ended",
    "call.analysis_ready",
  ]);
  const [started, completed] = ["campaign.started", "campaign.completed"].map(
    (type) => events.find((e) => e.type === type)!.data as { updatedAt: string },
  );
  expect(started!.updatedAt < completed!.updatedAt).toBe(true);
});
