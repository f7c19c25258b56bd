/**
 * The built v1.js itself, loaded by a <script> tag in a happy-dom page from a local HTTP server that
 * answers like the service (script, CORS, POST /api/v1/web-calls).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Window } from "happy-dom";
import { widgetAssets } from "../../src/widget/assets.ts";
import { waitUntil } from "../helpers/wait.ts";
import { FakeTrack, fakeStream } from "./harness.ts";

let server: ReturnType<typeof Bun.serve>;
let base: string;
const posts: { origin: string | null; body: unknown }[] = [];

beforeAll(async () => {
  const v1 = (await widgetAssets())["v1.js"].bodies.identity;
  server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (req) => {
      const url = new URL(req.url);
      const cors = {
        "access-control-allow-origin": req.headers.get("origin") ?? "*",
        "access-control-allow-headers": "content-type",
        "access-control-allow-methods": "POST",
      };
      if (url.pathname === "/widget/v1.js") {
        return new Response(v1, {
          headers: { "content-type": "text/javascript", "access-control-allow-origin": "*" },
        });
      }
      if (url.pathname === "/api/v1/web-calls" && req.method === "OPTIONS")
        return new Response(null, { status: 204, headers: cors });
      if (url.pathname === "/api/v1/web-calls" && req.method === "POST") {
        posts.push({ origin: req.headers.get("origin"), body: await req.json() });
        return Response.json(
          { simulated: true, livemode: false, callId: "call_x", maxSeconds: 600 },
          { status: 201, headers: cors },
        );
      }
      return new Response("not found", { status: 404 });
    },
  });
  base = `http://127.0.0.1:${server.port}`;
});
afterAll(() => server.stop(true));

async function pageWithScript(attributes: Record<string, string>, lang = "fr") {
  const window = new Window({
    // http: the local server is plain HTTP (an https page would block it as mixed content).
    url: "http://shop.example.com/contact",
    settings: { enableJavaScriptEvaluation: true, suppressInsecureJavaScriptEnvironmentWarning: true },
  });
  const document = window.document;
  document.documentElement.setAttribute("lang", lang);
  const tracks = [new FakeTrack()];
  Object.defineProperty(window.navigator, "mediaDevices", {
    value: { getUserMedia: async () => fakeStream(tracks) },
  });
  const script = document.createElement("script");
  script.setAttribute("src", `${base}/widget/v1.js`);
  // async: happy-dom fetches blocking scripts from a child process, which cannot reach this process's server.
  script.async = true;
  for (const [k, v] of Object.entries(attributes)) script.setAttribute(k, v);
  const loaded = new Promise((resolve, reject) => {
    script.addEventListener("load", resolve);
    script.addEventListener("error", reject);
  });
  document.body.appendChild(script);
  await loaded;
  return { window, document, script, tracks };
}

describe("the built script in a page", () => {
  test("without attributes it only defines ServiceWidget with init", async () => {
    const { window, document } = await pageWithScript({});
    const global = (window as unknown as { ServiceWidget: { init: unknown } }).ServiceWidget;
    expect(typeof global.init).toBe("function");
    expect(document.querySelectorAll("service-widget")).toHaveLength(0);
    await window.happyDOM.close();
  });

  test("with data-session-token: the token leaves the page at once, the button calls the API next to the script", async () => {
    const token = "inf_wcs_9hG2kL5pQ8rT1vX4zB7nM0cF";
    const { window, document, script, tracks } = await pageWithScript({ "data-session-token": token });
    expect(script.hasAttribute("data-session-token")).toBe(false);
    expect(document.documentElement.outerHTML).not.toContain(token);
    const host = document.querySelector("service-widget")!;
    const button = host.shadowRoot!.querySelector("button")!;
    expect(button.textContent).toBe("Parler à l'agent");
    const states: unknown[] = [];
    document.addEventListener("service:statechange", (e) =>
      states.push((e as unknown as CustomEvent).detail),
    );
    button.click();
    await waitUntil("two state changes", () => states.length >= 2, { stepMs: 10 });
    expect(states).toEqual([{ state: "connecting" }, { state: "in-call" }]);
    expect(button.textContent).toBe("Raccrocher");
    expect(posts.at(-1)).toEqual({ origin: "http://shop.example.com", body: { sessionToken: token } });
    // Escape hangs up and releases the microphone.
    document.body.dispatchEvent(new window.KeyboardEvent("keydown", { key: "Escape", bubbles: true }));
    expect(states.at(-1)).toEqual({ state: "idle" });
    expect(tracks[0]!.stopped).toBe(true);
    // The token served its call: a new click is refused without a request.
    const before = posts.length;
    button.click();
    await waitUntil("five state changes", () => states.length >= 5, { stepMs: 10 });
    expect(states.at(-1)).toEqual({ state: "error", error: "invalid_session_token" });
    expect(posts.length).toBe(before);
    await window.happyDOM.close();
  });

  test("init() from the global gives the handle; a wrong configuration is reported without the key", async () => {
    const { window, document } = await pageWithScript({ "data-key": "inf_pub_secretish" }, "en");
    expect(document.querySelectorAll("service-widget")).toHaveLength(0);
    const printed = window.happyDOM.virtualConsolePrinter.readAsString();
    expect(printed).toContain("captchaSiteKey");
    expect(printed).not.toContain("inf_pub_secretish");
    const api = (window as unknown as { ServiceWidget: { init(o: object): Record<string, unknown> } })
      .ServiceWidget;
    const handle = api.init({ sessionToken: "inf_wcs_abc" });
    expect(Object.keys(handle).sort()).toEqual(["destroy", "getState", "start", "stop"]);
    expect(document.querySelector("service-widget")!.shadowRoot!.querySelector("button")!.textContent).toBe(
      "Talk to the agent",
    );
    (handle.destroy as () => void)();
    expect(document.querySelectorAll("service-widget")).toHaveLength(0);
    await window.happyDOM.close();
  });
});
