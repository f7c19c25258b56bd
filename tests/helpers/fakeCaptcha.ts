/**
 * A local stand-in for the bot check's verify endpoint: a real HTTP server speaking the siteverify
 * wire format (form POST `secret`, `response`, `remoteip`; JSON `success`, `score`, `action`,
 * `hostname`, `challenge_ts`, `error-codes`). Each token's answer is configured by the test; unknown
 * tokens are refused like the real service refuses them. Requests are recorded.
 */

export interface CaptchaTokenAnswer {
  success?: boolean;
  score?: number;
  action?: string;
  hostname?: string;
  /** Milliseconds to wait before answering (to exercise the verifier's timeout). */
  delayMs?: number;
  /** Keep accepting the token after its first verification (the real service refuses duplicates). */
  reusable?: boolean;
}

export interface RecordedCaptchaRequest {
  secret: string | null;
  response: string | null;
  remoteip: string | null;
  contentType: string | null;
}

export interface FakeCaptcha {
  /** The verify URL, as RECAPTCHA_VERIFY_URL. */
  url: string;
  secret: string;
  /** RECAPTCHA_SECRET and RECAPTCHA_VERIFY_URL for parseEnv. */
  env: Record<string, string>;
  requests: RecordedCaptchaRequest[];
  /** Configures the answer for `token`: by default success, score 0.9, action `web_call`, the given hostname. */
  token(token: string, answer?: CaptchaTokenAnswer): string;
  close(): Promise<void>;
}

export async function startFakeCaptcha(
  opts: { secret?: string; hostname?: string } = {},
): Promise<FakeCaptcha> {
  const secret = opts.secret ?? "fake-recaptcha-secret";
  const defaultHost = opts.hostname ?? "shop.example.com";
  const answers = new Map<string, CaptchaTokenAnswer>();
  const verified = new Set<string>();
  const requests: RecordedCaptchaRequest[] = [];
  const timers = new Set<ReturnType<typeof setTimeout>>();

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      if (req.method !== "POST") return new Response("method not allowed", { status: 405 });
      const form = new URLSearchParams(await req.text());
      const request: RecordedCaptchaRequest = {
        secret: form.get("secret"),
        response: form.get("response"),
        remoteip: form.get("remoteip"),
        contentType: req.headers.get("content-type"),
      };
      requests.push(request);
      const refuse = (code: string) => Response.json({ success: false, "error-codes": [code] });
      if (request.secret !== secret) return refuse("invalid-input-secret");
      if (!request.response) return refuse("missing-input-response");
      const answer = answers.get(request.response);
      if (!answer) return refuse("invalid-input-response");
      if (answer.delayMs) {
        await new Promise<void>((resolve) => {
          const t = setTimeout(() => {
            timers.delete(t);
            resolve();
          }, answer.delayMs);
          timers.add(t);
        });
      }
      if (verified.has(request.response) && !answer.reusable) return refuse("timeout-or-duplicate");
      verified.add(request.response);
      if (answer.success === false) return refuse("invalid-input-response");
      return Response.json({
        success: true,
        score: answer.score ?? 0.9,
        action: answer.action ?? "web_call",
        hostname: answer.hostname ?? defaultHost,
        challenge_ts: new Date().toISOString(),
      });
    },
  });
  const url = `http://127.0.0.1:${server.port}/recaptcha/api/siteverify`;
  return {
    url,
    secret,
    env: { RECAPTCHA_SECRET: secret, RECAPTCHA_VERIFY_URL: url },
    requests,
    token(token, answer = {}) {
      answers.set(token, answer);
      return token;
    },
    async close() {
      for (const t of timers) clearTimeout(t);
      await server.stop(true);
    },
  };
}
