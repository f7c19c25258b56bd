import { describe, expect, test } from "bun:test";
import { widgetAssets } from "../../src/widget/assets.ts";

describe("widget size", () => {
  test("v1.js is at most 10 KB minified and gzipped, and carries no media client code", async () => {
    const assets = await widgetAssets();
    const v1 = assets["v1.js"];
    expect(v1.bodies.gzip.byteLength).toBeLessThanOrEqual(10 * 1024);
    const text = new TextDecoder().decode(v1.bodies.identity);
    for (const marker of ["livekit", "LiveKit", "RTCPeerConnection", "SignalClient"]) {
      expect(text).not.toContain(marker);
    }
    // The media client lives only in media.js.
    const media = new TextDecoder().decode(assets["v1/media.js"].bodies.identity);
    expect(media).toContain("RTCPeerConnection");
    expect(media.length).toBeGreaterThan(20 * text.length);
  });
});
