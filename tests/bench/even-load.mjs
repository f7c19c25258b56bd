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
// Why HTTP/1.1 written on `node:net` sockets, as autocannon and wrk do, rather than `node:http`: each
// request is bytes made once, and an answer is read for its status and length alone. node:http's
// client took 320 µs of CPU a request here (a fifth of a core at 500/s, on the two cores the server
// shares with it), this 130 µs. Answers must carry Content-Length or be chunked, as the service's do.
//
// node tests/bench/even-load.mjs '<json: {url, path, method, requests: [{headers, body}], rate, seconds, maxConnections}>'
//   → JSON on stdout, the shape of rotating-load.mjs's
//
// EVEN_TRACE=<file>: each answer's [due ms from the start, latency ms] and the start as epoch ms are
// written there too, to see whether slow answers are spread out or come together (a stall), and to set
// them against what the server and the database did at that moment.
import net from "node:net";

const o = JSON.parse(process.argv[2]);
const target = new URL(o.url);
const intervalMs = 1000 / o.rate;
const total = Math.round(o.rate * o.seconds);
const requests = o.requests.map((r) => {
  const body = Buffer.from(r.body);
  const head =
    `${o.method} ${o.path} HTTP/1.1\r\nhost: ${target.host}\r\ncontent-length: ${body.length}\r\n` +
    Object.entries(r.headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join("") +
    "\r\n";
  return Buffer.concat([Buffer.from(head, "latin1"), body]);
});
const latencies = [];
const trace = [];
const statusCodes = {};
let errors = 0;
let answered = 0;
let sent = 0;
/** How late this process sent its requests (the generator's own lag), ms. */
let latestSend = 0;

let finished;
const done = new Promise((resolve) => {
  finished = resolve;
});
const finish = () => {
  if (++answered === total) finished();
};

/** Keep-alive connections, opened as requests need them, at most `maxConnections`; beyond that a due request queues (and its wait counts). */
const idle = [];
const queued = [];
let open = 0;

function connect() {
  open++;
  const socket = net.connect({ host: target.hostname, port: Number(target.port), noDelay: true });
  const reader = answerReader((status) => {
    const due = socket.current;
    socket.current = null;
    const latency = performance.now() - due;
    latencies.push(latency);
    if (process.env.EVEN_TRACE) trace.push([Math.round(due - start), Math.round(latency)]);
    statusCodes[status] = (statusCodes[status] ?? 0) + 1;
    finish();
    const next = queued.shift();
    if (next) send(socket, next);
    else idle.push(socket);
  });
  socket.current = null;
  socket.on("data", (chunk) => {
    try {
      reader(chunk);
    } catch {
      socket.destroy();
    }
  });
  const lost = () => {
    const i = idle.indexOf(socket);
    if (i >= 0) idle.splice(i, 1);
    if (socket.current !== null) {
      socket.current = null;
      errors++;
      finish();
    }
  };
  socket.on("error", lost);
  socket.on("close", () => {
    lost();
    open--;
    // A request waiting for a connection gets a new one.
    if (queued.length > 0 && open < o.maxConnections) send(connect(), queued.shift());
  });
  return socket;
}

/** Sends request `n`, due at `due`, on `socket`. */
function send(socket, { n, due }) {
  socket.current = due;
  socket.write(requests[n]);
}

/**
 * Reads answers from a connection's bytes, calling `answered(status)` once each is whole: its head up to
 * the blank line, then a body of Content-Length bytes, or chunks up to the last one.
 */
function answerReader(answered) {
  let buffer = Buffer.alloc(0);
  let status = 0;
  let bodyLeft = -1;
  let chunked = false;
  return (chunk) => {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
    for (;;) {
      if (bodyLeft < 0 && !chunked) {
        const end = buffer.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buffer.toString("latin1", 0, end);
        status = Number(head.slice(9, 12));
        const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
        chunked = !length && /\r\ntransfer-encoding:\s*chunked/i.test(head);
        if (!length && !chunked) throw new Error("an answer without Content-Length, not chunked");
        bodyLeft = length ? Number(length[1]) : -1;
        buffer = buffer.subarray(end + 4);
      }
      if (chunked) {
        const line = buffer.indexOf("\r\n");
        if (line < 0) return;
        const size = Number.parseInt(buffer.toString("latin1", 0, line), 16);
        if (buffer.length < line + 2 + size + 2) return;
        buffer = buffer.subarray(line + 2 + size + 2);
        if (size > 0) continue;
        chunked = false;
      } else {
        if (buffer.length < bodyLeft) return;
        buffer = buffer.subarray(bodyLeft);
        bodyLeft = -1;
      }
      answered(status);
    }
  };
}

function offer(request) {
  const socket = idle.pop();
  if (socket) send(socket, request);
  else if (open < o.maxConnections) send(connect(), request);
  else queued.push(request);
}

const start = performance.now();
const tick = () => {
  const now = performance.now();
  while (sent < total && start + sent * intervalMs <= now) {
    const due = start + sent * intervalMs;
    latestSend = Math.max(latestSend, now - due);
    offer({ n: sent % requests.length, due });
    sent++;
  }
  if (sent < total) setTimeout(tick, Math.max(0, start + sent * intervalMs - performance.now()));
};
tick();
await done;
const elapsed = (performance.now() - start) / 1000;
for (const socket of idle) socket.destroy();
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
process.exit(0);
