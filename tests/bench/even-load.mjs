// A second process offering requests at even intervals, whatever the answers do (an open loop):
// the i-th request is due at start + i / rate, and its latency is counted from when it was due, so
// a request that waited for a free connection, or for this process, counts that wait too.
//
// Why not autocannon's `-R` (rotating-load.mjs): autocannon keeps a quota per connection and second
// (lib/httpClient.js, `reqsMadeThisSecond`, reset by a one-second interval), so each connection sends
// its share of a second as fast as the server answers, then waits for the next second. Its "500/s"
// over 32 connections is a burst of 32 concurrent requests at the start of every second until 500
// are answered, then silence: its latency is a burst's, not that of 500 requests a second.
//
// node tests/bench/even-load.mjs '<json: {url, path, method, requests: [{headers, body}], rate, seconds, maxConnections}>'
//   → JSON on stdout, the shape of rotating-load.mjs's
//
// EVEN_TRACE=<file>: each answer's [due ms from the start, latency ms] and the start as epoch ms are
// written there too, to see whether slow answers are spread out or come together (a stall), and to set
// them against what the server and the database did at that moment.
import http from "node:http";

const o = JSON.parse(process.argv[2]);
const target = new URL(o.url);
// Keep-alive connections, opened as requests need them, at most `maxConnections`; beyond that a due
// request queues in the agent (and its wait counts).
const agent = new http.Agent({ keepAlive: true, maxSockets: o.maxConnections });
const intervalMs = 1000 / o.rate;
const total = Math.round(o.rate * o.seconds);
const bodies = o.requests.map((r) => Buffer.from(r.body));
const latencies = [];
const trace = [];
const statusCodes = {};
let errors = 0;
let answered = 0;
let sent = 0;
/** How late this process sent its requests (the generator's own lag), ms. */
let latestSend = 0;

const start = performance.now();
const done = new Promise((resolve) => {
  const finish = () => {
    if (++answered === total) resolve();
  };
  const send = (i, dueAt) => {
    const n = i % o.requests.length;
    const req = http.request(
      {
        host: target.hostname,
        port: target.port,
        path: o.path,
        method: o.method,
        agent,
        headers: { ...o.requests[n].headers, "content-length": bodies[n].length },
      },
      (res) => {
        res.resume();
        res.on("end", () => {
          const latency = performance.now() - dueAt;
          latencies.push(latency);
          if (process.env.EVEN_TRACE) trace.push([Math.round(dueAt - start), Math.round(latency)]);
          statusCodes[res.statusCode] = (statusCodes[res.statusCode] ?? 0) + 1;
          finish();
        });
      },
    );
    req.on("error", () => {
      errors++;
      finish();
    });
    req.end(bodies[n]);
  };
  const tick = () => {
    const now = performance.now();
    while (sent < total && start + sent * intervalMs <= now) {
      const dueAt = start + sent * intervalMs;
      latestSend = Math.max(latestSend, now - dueAt);
      send(sent++, dueAt);
    }
    if (sent < total) setTimeout(tick, Math.max(0, start + sent * intervalMs - performance.now()));
  };
  tick();
});
await done;
const elapsed = (performance.now() - start) / 1000;
agent.destroy();
if (process.env.EVEN_TRACE) {
  const { writeFileSync } = await import("node:fs");
  writeFileSync(process.env.EVEN_TRACE, JSON.stringify({ start: performance.timeOrigin + start, trace }));
}

latencies.sort((a, b) => a - b);
const at = (p) =>
  latencies.length
    ? Math.round(latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))])
    : 0;
const ok = Object.entries(statusCodes)
  .filter(([code]) => code.startsWith("2"))
  .reduce((n, [, c]) => n + c, 0);
process.stdout.write(
  JSON.stringify({
    requestsPerSecond: Math.round(answered / elapsed),
    // Per second from the first request to the last answer: a server that fell behind answered later.
    acceptedPerSecond: Math.round(ok / elapsed),
    p50: at(50),
    p99: at(99),
    non2xx: answered - errors - ok,
    statusCodes,
    errors,
    total: answered,
    cpuMs: (({ user, system }) => Math.round((user + system) / 1000))(process.cpuUsage()),
    // The generator's own lateness at its worst: large means this process, not the server, was behind.
    latestSendMs: Math.round(latestSend),
  }),
);
