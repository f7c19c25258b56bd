// A second process for bench:mixed: autocannon (programmatic, so each connection can chain two
// requests) minting a test session token, then redeeming it from its own client address.
// node tests/bench/pairs-load.mjs '<json: {url, key, agentId, connections, seconds}>'  → JSON on stdout
import autocannon from "autocannon";

const o = JSON.parse(process.argv[2]);
let seq = 0;
const nextAddress = () => {
  seq += 1;
  return `10.${(seq >> 16) & 255}.${(seq >> 8) & 255}.${seq & 255}`;
};
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
    },
  ],
});
process.stdout.write(
  JSON.stringify({
    requestsPerSecond: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
    total: result.requests.total,
  }),
);
