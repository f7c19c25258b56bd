import type { Context } from "hono";
import type { Deps } from "../../deps.ts";
import type { App, AppEnv } from "../../http/appEnv.ts";
import { clientAddressResolver, rateLimitKey } from "../../http/clientAddress.ts";
import { demoKeyAuth, findDemo } from "../../services/demo.ts";
import { DEMO_PAGE_RATE_LIMIT, hitRateLimit } from "../../services/rateLimit.ts";
import { mintSessionToken } from "../../services/sessionTokens.ts";

/**
 * `GET /demo`: a page that shows the widget of the demo organization (seeded on the first start).
 * The page carries a test session token minted here, on the server, so no key ever reaches the
 * browser; the widget removes the token attribute as soon as it reads it. Each load mints one
 * single-use token, valid five minutes, at most a few a minute per visitor address (the web calls' rate
 * limit machinery, a bucket of its own). Test mode only: the call is simulated, nothing is billed.
 *
 * Served under a strict Content-Security-Policy (no inline script or style: the page's styles are
 * the file `/demo/demo.css`), and never cached, since the token in it serves one call.
 */

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const PAGE_HEADERS = {
  "Content-Type": "text/html; charset=utf-8",
  "Content-Security-Policy": CSP,
  "Cache-Control": "no-store",
  "Referrer-Policy": "no-referrer",
  "X-Content-Type-Options": "nosniff",
  "X-Frame-Options": "DENY",
};

type Lang = "en" | "fr";

const TEXTS = {
  en: {
    title: "Web call demo",
    intro:
      "This page shows the web call widget of the demo organization. The call is simulated (test mode): " +
      "nothing is dialled or billed, and the agent does not speak.",
    how:
      "The server minted a single-use session token for this page; the widget removed it from the page as " +
      "soon as it read it. Reload the page for another call.",
    steps: [
      "Press the button (or Tab to it and press Enter).",
      "Allow the microphone if your browser asks.",
      "The call shows as in progress for about a minute; press the button or Escape to end it.",
    ],
    other: "Version française",
    busyTitle: "Too many demo calls",
    busy: "This address has loaded the demo many times in the last minute. Try again in a minute.",
    missingTitle: "No demo here",
    missing:
      "This server has no demo organization: the demo is created only on the first start with an empty " +
      "embedded database, or with DEMO=true.",
  },
  fr: {
    title: "Démo d'appel web",
    intro:
      "Cette page montre le widget d'appel web de l'organisation de démonstration. L'appel est simulé " +
      "(mode test) : rien n'est composé ni facturé, et l'agent ne parle pas.",
    how:
      "Le serveur a créé pour cette page un jeton de session à usage unique ; le widget l'a retiré de la " +
      "page dès sa lecture. Rechargez la page pour un autre appel.",
    steps: [
      "Appuyez sur le bouton (ou atteignez-le avec Tab et appuyez sur Entrée).",
      "Autorisez le micro si votre navigateur le demande.",
      "L'appel s'affiche en cours pendant environ une minute ; le bouton ou Échap y met fin.",
    ],
    other: "English version",
    busyTitle: "Trop d'appels de démo",
    busy: "Cette adresse a chargé la démo de nombreuses fois dans la dernière minute. Réessayez dans une minute.",
    missingTitle: "Pas de démo ici",
    missing:
      "Ce serveur n'a pas d'organisation de démonstration : elle n'est créée qu'au premier démarrage avec " +
      "une base embarquée vide, ou avec DEMO=true.",
  },
} as const;

export const DEMO_CSS = `
html{color-scheme:light}
body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#111827;background:#f9fafb}
main{max-width:40rem;margin:0 auto;padding:3rem 1.5rem 8rem}
h1{font-size:1.75rem;margin:0 0 1rem}
p,ol{margin:0 0 1rem}
a{color:#1d4ed8}
a:focus-visible{outline:3px solid #111827;outline-offset:2px}
#call{margin:2rem 0;min-height:3rem}
.note{color:#374151;font-size:.9375rem}
`;

export function registerDemo(app: App, deps: Deps) {
  app.get("/demo/demo.css", (c) =>
    c.body(DEMO_CSS, 200, {
      "Content-Type": "text/css; charset=utf-8",
      "Cache-Control": "public, max-age=300",
      "X-Content-Type-Options": "nosniff",
    }),
  );
  const clientAddress = clientAddressResolver(deps.env.TRUST_PROXY);
  // Visitors counted as web calls count them: IPv6 by its /64.
  app.get("/demo", (c) => demoPage(c, deps, rateLimitKey(clientAddress(c))));
}

async function demoPage(c: Context<AppEnv>, deps: Deps, visitor: string): Promise<Response> {
  const lang: Lang = c.req.query("lang") === "fr" ? "fr" : "en";
  const t = TEXTS[lang];
  const demo = await findDemo(deps.sql);
  const auth = demo ? await demoKeyAuth(deps, demo) : null;
  if (!demo || !auth) {
    return c.body(page(lang, t.missingTitle, `<p>${esc(t.missing)}</p>`), 404, PAGE_HEADERS);
  }
  const limit = await hitRateLimit(deps.sql, deps.clock, visitor, DEMO_PAGE_RATE_LIMIT);
  if (!limit.allowed) {
    return c.body(page(lang, t.busyTitle, `<p>${esc(t.busy)}</p>`), 429, {
      ...PAGE_HEADERS,
      "Retry-After": String(limit.retryAfterSeconds),
    });
  }
  const minted = await mintSessionToken(deps, auth, { agentId: demo.agentId });
  const other = lang === "en" ? "fr" : "en";
  const body = [
    `<p>${esc(t.intro)}</p>`,
    `<ol>${t.steps.map((s) => `<li>${esc(s)}</li>`).join("")}</ol>`,
    `<div id="call"></div>`,
    `<p class="note">${esc(t.how)}</p>`,
    `<p><a href="/demo?lang=${other}" lang="${other}">${esc(t.other)}</a></p>`,
    `<script src="/widget/v1.js" data-session-token="${esc(minted.token)}" data-target="#call" data-lang="${lang}"></script>`,
  ].join("\n");
  return c.body(page(lang, t.title, body), 200, PAGE_HEADERS);
}

function page(lang: Lang, title: string, body: string): string {
  return `<!doctype html>
<html lang="${lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${esc(title)}</title>
<link rel="stylesheet" href="/demo/demo.css">
</head>
<body>
<main>
<h1>${esc(title)}</h1>
${body}
</main>
</body>
</html>
`;
}

function esc(s: string): string {
  return s.replace(
    /[&<>"']/g,
    (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[ch]!,
  );
}
