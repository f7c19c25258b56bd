// A second process for bench:mixed: autocannon (programmatic, so each connection can chain two
// requests) minting a test session token, then redeeming it from its own client address. A pair's
// latency runs from the mint's request to the redeem's answer, as the user waits for both.
// node tests/bench/pairs-load.mjs '<json: {url, key, agentId, connections, seconds}>'  → JSON on stdout
import autocannon from "autocannon";

const o = JSON.parse(process.argv[2]);
let seq = 0;
const nextAddress = () => {
  seq += 1;
  return `10.${(seq >> 16) & 255}.${(seq >> 8) & 255}.${seq & 255}`;
};
/** Milliseconds of each pair whose two requests both succeeded. */
const latencies = [];
let failed = 0;
const result = await autocannon({
  url: o.url,
  connections: o.connections,
  duration: o.seconds,
  requests: [
    {
      method: "POST",
      path: "/api/v1/web-call-sessions",
      headers: { authorization: `Bearer ${o.key}`, "content-type": "application/json" },
      body: JSON.stringify({ agentId: o.agentId }),
      // Called as the request is made, just before it is sent.
      setupRequest: (req, context) => {
        context.startedAt = performance.now();
        return req;
      },
      onResponse: (status, body, context) => {
        context.token = status === 201 ? JSON.parse(body).token : "";
      },
    },
    {
      method: "POST",
      path: "/api/v1/web-calls",
      setupRequest: (req, context) => ({
        ...req,
        headers: { "content-type": "application/json", "x-forwarded-for": nextAddress() },
        body: JSON.stringify({ sessionToken: context.token }),
      }),
      onResponse: (status, _body, context) => {
        if (status === 201 && context.token) latencies.push(performance.now() - context.startedAt);
        else failed += 1;
      },
    },
  ],
});
latencies.sort((a, b) => a - b);
const percentile = (p) =>
  latencies.length
    ? Math.round(latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] * 10) /
      10
    : 0;
process.stdout.write(
  JSON.stringify({
    pairsPerSecond: latencies.length / (result.duration || o.seconds),
    p50: percentile(50),
    p99: percentile(99),
    pairs: latencies.length,
    failed,
    non2xx: result.non2xx,
    errors: result.errors,
  }),
);
