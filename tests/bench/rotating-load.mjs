// A second process for benchmarks whose requests differ from one to the next (several organizations'
// keys, say): autocannon (programmatic) sending `requests[i % n]` as its i-th request.
// node tests/bench/rotating-load.mjs '<json: {url, path, method, requests: [{headers, body}], connections, seconds, rate?}>'
//   → JSON on stdout, the shape of lib.ts's LoadResult
import autocannon from "autocannon";

const o = JSON.parse(process.argv[2]);
let i = 0;
const result = await autocannon({
  url: o.url,
  connections: o.connections,
  duration: o.seconds,
  ...(o.rate ? { overallRate: o.rate } : {}),
  requests: [
    {
      method: o.method,
      path: o.path,
      setupRequest: (req) => {
        const next = o.requests[i++ % o.requests.length];
        return { ...req, headers: next.headers, body: next.body };
      },
    },
  ],
});
process.stdout.write(
  JSON.stringify({
    requestsPerSecond: Math.round(result.requests.average),
    // Answered 2xx, per second of the run (requestsPerSecond counts refusals too).
    acceptedPerSecond: Math.round(result["2xx"] / o.seconds),
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    // Answers by status code, e.g. {"201": 4990, "429": 10}.
    statusCodes: Object.fromEntries(
      Object.entries(result.statusCodeStats ?? {}).map(([code, s]) => [code, s.count]),
    ),
    errors: result.errors,
    total: result.requests.total,
    // This process's own CPU (the load generator's share of the machine), in milliseconds.
    cpuMs: (({ user, system }) => Math.round((user + system) / 1000))(process.cpuUsage()),
  }),
);
