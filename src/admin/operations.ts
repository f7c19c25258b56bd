import type { z } from "@hono/zod-openapi";
import type { PageInput } from "../db/engine/pages.ts";
import type { Deps } from "../deps.ts";
import type { ErrorCode } from "../errors.ts";
import type { IdPrefix } from "../ids.ts";
import { createAgent, listAgentsOf, updateAgent } from "../services/agents.ts";
import { listFailedTimers, retryFailedTimer } from "../services/failedTimers.ts";
import { publishableKeyStats } from "../services/keyStats.ts";
import {
  createPublishableKey,
  createSecretKey,
  listPublishableKeys,
  listSecretKeys,
  revokePublishableKey,
  revokeSecretKey,
} from "../services/keys.ts";
import { createKnowledgeBase, updateKnowledgeBase } from "../services/knowledgeBases.ts";
import {
  createOrganization,
  getOrganization,
  listOrganizations,
  updateOrganization,
} from "../services/organizations.ts";
import { AgentDetailsListSchema, AgentDetailsSchema, AgentInput, AgentPatch } from "./schema/agents.ts";
import { FailedTimerListSchema, FailedTimerSchema } from "./schema/failedTimers.ts";
import { AdminListQuery } from "./schema/fields.ts";
import {
  CreatedPublishableKeySchema,
  CreatedSecretKeySchema,
  KeyStatsQuery,
  KeyStatsSchema,
  PublishableKeyInput,
  PublishableKeyListSchema,
  RevokedPublishableKeySchema,
  RevokedSecretKeySchema,
  SecretKeyInput,
  SecretKeyListSchema,
} from "./schema/keys.ts";
import { KnowledgeBaseInput, KnowledgeBasePatch, KnowledgeBaseSchema } from "./schema/knowledgeBases.ts";
import {
  OrganizationDetailsSchema,
  OrganizationInput,
  OrganizationListSchema,
  OrganizationPatch,
  OrganizationSchema,
} from "./schema/organizations.ts";

/**
 * The operators' operations, described once. Each becomes an admin API route under /api/admin/v1
 * (routes/admin/index.ts) and a `voice-service admin <name>` command (cli/admin.ts): the same
 * validation, the same service call and the same answer.
 */
export interface AdminOperation {
  /** The CLI command. */
  name: string;
  method: "get" | "post" | "patch";
  /** Under /api/admin/v1; `{id}` is the object the operation acts on. */
  path: string;
  summary: string;
  description: string;
  /** The `{id}` of the path: its prefix, and how the CLI takes it (a positional argument or a flag). */
  id?: {
    prefix: IdPrefix;
    example: string;
    cli: { positional: string } | { flag: string; value: string; help: string };
  };
  /** The JSON body (strict); a missing body is validated as `{}`. */
  body?: z.ZodType;
  /** The query parameters of a read (strict, string values); the CLI takes them as flags too. */
  query?: z.ZodType;
  /** CLI flags whose name, placeholder or help differ from what the body or query field gives. */
  flags?: Record<string, { flag?: string; value?: string; help?: string }>;
  response: { status: 200 | 201; description: string; schema: z.ZodType };
  /** Codes beyond those every admin operation can answer (invalid_key, and with a body invalid_request …). */
  errors: ErrorCode[];
  /** `input` is the validated body, or the validated query of a read. */
  run(deps: Deps, id: string, input: Record<string, unknown>): Promise<unknown>;
}

const ORG_ID = "org_01JD8Y3M6W9Q2T4V5X7Z8A9B0C";
const AGENT_ID = "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C";
const KEY_ID = "key_01JD8Y3M6W9Q2T4V5X7Z8A9B0C";

/** The flags of an agent's fields, for creating and for changing one. */
const agentFlags = (created: boolean) => ({
  name: { value: "<text>", help: created ? "Name of the agent." : "New name." },
  active: { value: "[true|false]", help: created ? "Takes calls (default true)." : "Takes calls or not." },
  livekitAgentName: {
    value: "<text>",
    help: created
      ? "Agent name dispatched on the media server (default: the agent id)."
      : 'Agent name dispatched on the media server; "" clears it (the agent id is used).',
  },
  language: {
    value: "<bcp47-tag>",
    help: created
      ? "Language of the agent, e.g. en, fr, fr-CA (default en)."
      : "Language of the agent, e.g. fr-CA.",
  },
  instructions: {
    value: "<text>",
    help: created
      ? "What the voice agent is told to do (at most 20,000 characters)."
      : 'What the voice agent is told to do; "" clears it.',
  },
  greeting: {
    value: "<text>",
    help: created
      ? "The first sentence the agent says (at most 1,000 characters)."
      : 'The first sentence the agent says; "" clears it.',
  },
  knowledgeBaseIds: {
    flag: "knowledge-bases",
    value: "<kb_…,…>",
    help: created
      ? "Comma-separated knowledge bases of the organization the agent searches."
      : 'Comma-separated knowledge bases of the organization the agent searches; "" for none.',
  },
});

/** The flags of an organization's carrier settings (live phone calls), for creating and for changing one. */
const carrierFlags = (created: boolean) => ({
  sipTrunkId: {
    value: "<ST_…>",
    help: `Outbound SIP trunk of live phone calls; ${created ? "default" : '""'}: LIVEKIT_SIP_TRUNK_ID.`,
  },
  callerNumber: {
    value: "<+E164>",
    help: `Number callees see; ${created ? "default" : '""'}: LIVEKIT_SIP_FROM_NUMBER.`,
  },
  allowedCountries: {
    value: "<FR,BE,…>",
    help: `ISO country codes live phone calls may reach; ${created ? "default" : '""'}: every country.`,
  },
  callWindow: {
    value: "<json>",
    help:
      `When calls may start, e.g. '{"start":"09:00","end":"20:00","timeZone":"Europe/Paris","days":[1,2,3,4,5]}'; ` +
      `${created ? "default" : '""'}: any time.`,
  },
  maxConcurrentCalls: {
    value: "<n>",
    help: `Live phone calls at once, 1–1000${created ? " (default 10)" : ""}.`,
  },
  maxCallsPerHour: {
    value: "<n>",
    help: `Live phone calls placed per 60 minutes, 1–100000${created ? " (default 100)" : ""}.`,
  },
});

/** The flags of a cursor list's query. */
const listFlags = {
  limit: { value: "<1-100>", help: "Items per page (default 20)." },
  starting_after: {
    flag: "starting-after",
    value: "<id>",
    help: "Id of the last item of the previous page.",
  },
};

const inOrganization = {
  prefix: "org",
  example: ORG_ID,
  cli: { flag: "organization", value: "<org-id>", help: "The organization (org_…)." },
} as const;

export const adminOperations: AdminOperation[] = [
  {
    name: "create-organization",
    method: "post",
    path: "/organizations",
    summary: "Create an organization",
    description:
      "Creates an organization, optionally with a paid plan, a monthly allowance of live minutes and the " +
      "carrier settings of its live phone calls (SIP trunk, caller number, allowed countries, call window, " +
      "limits).",
    body: OrganizationInput,
    flags: {
      name: { value: "<text>", help: "Name of the organization." },
      paidPlan: { value: "true|false", help: "Active paid plan (default false)." },
      planMinutes: { value: "<n>", help: "Monthly allowance of live minutes (default 0)." },
      ...carrierFlags(true),
    },
    response: { status: 201, description: "The organization.", schema: OrganizationSchema },
    errors: [],
    run: (deps, _id, body) => createOrganization(deps, body as z.output<typeof OrganizationInput>),
  },
  {
    name: "update-organization",
    method: "patch",
    path: "/organizations/{id}",
    summary: "Update an organization",
    description:
      "Changes any of `name`, `paidPlan`, `planMinutes` and the carrier settings; fields left out keep their " +
      "value, `null` clears a setting. Changing `planMinutes` changes the monthly allowance, not the minutes " +
      "already used. Its live campaigns waiting on its rules (a call window, a limit) look again at once.",
    id: { prefix: "org", example: ORG_ID, cli: { positional: "<org-id>" } },
    body: OrganizationPatch,
    flags: {
      name: { value: "<text>", help: "New name." },
      paidPlan: { value: "true|false", help: "Active paid plan." },
      planMinutes: { value: "<n>", help: "Monthly allowance of live minutes (the usage is kept)." },
      ...carrierFlags(false),
    },
    response: { status: 200, description: "The organization.", schema: OrganizationSchema },
    errors: ["not_found"],
    run: (deps, id, body) => updateOrganization(deps, id, body as z.output<typeof OrganizationPatch>),
  },
  {
    name: "list-organizations",
    method: "get",
    path: "/organizations",
    summary: "List organizations",
    description:
      "Lists every organization, newest first, in the cursor convention (`limit`, `starting_after`).",
    query: AdminListQuery,
    flags: listFlags,
    response: { status: 200, description: "One page of organizations.", schema: OrganizationListSchema },
    errors: ["invalid_query", "invalid_cursor"],
    run: (deps, _id, query) => listOrganizations(deps, query as unknown as PageInput),
  },
  {
    name: "get-organization",
    method: "get",
    path: "/organizations/{id}",
    summary: "Read an organization",
    description:
      "Reads an organization with its use of the plan this calendar month (UTC): `usage.planMinutesUsed` " +
      "counts the minutes of ended calls and the reservations of calls still running.",
    id: { prefix: "org", example: ORG_ID, cli: { positional: "<org-id>" } },
    response: {
      status: 200,
      description: "The organization and this month's usage.",
      schema: OrganizationDetailsSchema,
    },
    errors: ["not_found"],
    run: (deps, id) => getOrganization(deps, id),
  },
  {
    name: "create-agent",
    method: "post",
    path: "/organizations/{id}/agents",
    summary: "Create an agent",
    description:
      "Creates an agent in the organization. `livekitAgentName` is the agent name dispatched on the media " +
      "server (default: the agent id). `language` (BCP 47, default `en`), `instructions`, `greeting` and " +
      "`knowledgeBaseIds` are what the voice agent reads with `GET /api/v1/agents/{id}`; a knowledge base that " +
      "is not the organization's is 404 `not_found` with `param` `knowledgeBaseIds`.",
    id: inOrganization,
    body: AgentInput,
    flags: agentFlags(true),
    response: { status: 201, description: "The agent.", schema: AgentDetailsSchema },
    errors: ["not_found"],
    run: (deps, id, body) => createAgent(deps, id, body as z.output<typeof AgentInput>),
  },
  {
    name: "update-agent",
    method: "patch",
    path: "/agents/{id}",
    summary: "Update an agent",
    description:
      "Changes any of `name`, `active`, `livekitAgentName`, `language`, `instructions`, `greeting` (`null` clears " +
      "those three), `knowledgeBaseIds` (the whole list); fields left out keep their value. An inactive agent " +
      "takes no new web call (503 `agent_unavailable`). A knowledge base that is not the organization's is 404 " +
      "`not_found` with `param` `knowledgeBaseIds`.",
    id: { prefix: "agt", example: AGENT_ID, cli: { positional: "<agent-id>" } },
    body: AgentPatch,
    flags: agentFlags(false),
    response: { status: 200, description: "The agent.", schema: AgentDetailsSchema },
    errors: ["not_found"],
    run: (deps, id, body) => updateAgent(deps, id, body as z.output<typeof AgentPatch>),
  },
  {
    name: "list-agents",
    method: "get",
    path: "/organizations/{id}/agents",
    summary: "List the agents of an organization",
    description: "Lists the agents of an organization, newest first, in the cursor convention.",
    id: inOrganization,
    query: AdminListQuery,
    flags: listFlags,
    response: { status: 200, description: "One page of agents.", schema: AgentDetailsListSchema },
    errors: ["not_found", "invalid_query", "invalid_cursor"],
    run: (deps, id, query) => listAgentsOf(deps, id, query as unknown as PageInput),
  },
  {
    name: "create-secret-key",
    method: "post",
    path: "/organizations/{id}/secret-keys",
    summary: "Create a secret key",
    description:
      "Creates a live (`inf_live_…`) or test (`inf_test_…`) secret key with the given scopes, optionally " +
      "restricted to some agents of the organization (404 `not_found` with `param` for another organization's " +
      "agent). The key is in this answer only; it is stored as a SHA-256 hash.",
    id: inOrganization,
    body: SecretKeyInput,
    flags: {
      mode: { value: "live|test", help: "Live or test key." },
      scopes: {
        value: "<a,b,…>",
        help: "Comma-separated scopes, e.g. webcalls:write,calls:write, or * for all.",
      },
      agentIds: { value: "<agt_…,…>", help: "Restrict the key to these agents of the organization." },
    },
    response: {
      status: 201,
      description: "The key, with its secret value shown this once.",
      schema: CreatedSecretKeySchema,
    },
    errors: ["not_found"],
    run: (deps, id, body) => createSecretKey(deps, id, body as z.output<typeof SecretKeyInput>),
  },
  {
    name: "create-publishable-key",
    method: "post",
    path: "/organizations/{id}/publishable-keys",
    summary: "Create a publishable key",
    description:
      "Creates a publishable key (`inf_pub_…`) bound to one agent of the organization, usable only from the " +
      "listed HTTPS origins (no wildcard, no path) and within its monthly minute cap. The key is in this " +
      "answer only; it is stored as a SHA-256 hash.",
    id: inOrganization,
    body: PublishableKeyInput,
    flags: {
      agentId: { flag: "agent", value: "<agent-id>", help: "The agent (agt_…)." },
      allowedOrigins: {
        flag: "origins",
        value: "<https://a,…>",
        help: "Comma-separated HTTPS origins allowed to use the key (no wildcard, no path).",
      },
      monthlyMinuteCap: { value: "<n>", help: "Web call minutes per calendar month (at least 1)." },
    },
    response: {
      status: 201,
      description: "The key, with its value shown this once.",
      schema: CreatedPublishableKeySchema,
    },
    errors: ["not_found"],
    run: (deps, id, body) => createPublishableKey(deps, id, body as z.output<typeof PublishableKeyInput>),
  },
  {
    name: "list-secret-keys",
    method: "get",
    path: "/organizations/{id}/secret-keys",
    summary: "List the secret keys of an organization",
    description:
      "Lists the organization's secret keys, revoked ones included, newest first, in the cursor convention. " +
      "Never the key itself (only its hash is stored): `start` shows its first characters. `lastUsedAt` is " +
      "at most a minute behind.",
    id: inOrganization,
    query: AdminListQuery,
    flags: listFlags,
    response: { status: 200, description: "One page of secret keys.", schema: SecretKeyListSchema },
    errors: ["not_found", "invalid_query", "invalid_cursor"],
    run: (deps, id, query) => listSecretKeys(deps, id, query as unknown as PageInput),
  },
  {
    name: "list-publishable-keys",
    method: "get",
    path: "/organizations/{id}/publishable-keys",
    summary: "List the publishable keys of an organization",
    description:
      "Lists the organization's publishable keys, revoked ones included, newest first, in the cursor " +
      "convention. Never the key itself: `start` shows its first characters. `lastUsedAt` is the latest web " +
      "call attempt with the key; `minutesUsedThisMonth` the minutes counted on its cap this calendar month.",
    id: inOrganization,
    query: AdminListQuery,
    flags: listFlags,
    response: {
      status: 200,
      description: "One page of publishable keys.",
      schema: PublishableKeyListSchema,
    },
    errors: ["not_found", "invalid_query", "invalid_cursor"],
    run: (deps, id, query) => listPublishableKeys(deps, id, query as unknown as PageInput),
  },
  {
    name: "revoke-secret-key",
    method: "post",
    path: "/secret-keys/{id}/revoke",
    summary: "Revoke a secret key",
    description:
      "Revokes a secret key: from now on it is refused with 401 `invalid_key` (by another process serving the " +
      "same PostgreSQL database once it hears of the change, which PostgreSQL tells it at the commit: a few " +
      "milliseconds, more under heavy load). 201 like every POST of the admin API; revoking again changes " +
      "nothing and answers the same.",
    id: { prefix: "key", example: KEY_ID, cli: { positional: "<key-id>" } },
    response: {
      status: 201,
      description: "The revoked key (without its secret value).",
      schema: RevokedSecretKeySchema,
    },
    errors: ["not_found"],
    run: (deps, id) => revokeSecretKey(deps, id),
  },
  {
    name: "revoke-publishable-key",
    method: "post",
    path: "/publishable-keys/{id}/revoke",
    summary: "Revoke a publishable key",
    description:
      "Revokes a publishable key: from now on web calls with it are refused with 401 `invalid_key`. 201 like " +
      "every POST of the admin API; revoking again changes nothing and answers the same.",
    id: { prefix: "key", example: KEY_ID, cli: { positional: "<key-id>" } },
    response: {
      status: 201,
      description: "The revoked key (without its value).",
      schema: RevokedPublishableKeySchema,
    },
    errors: ["not_found"],
    run: (deps, id) => revokePublishableKey(deps, id),
  },
  {
    name: "publishable-key-stats",
    method: "get",
    path: "/publishable-keys/{id}/stats",
    summary: "How a publishable key is used and abused",
    description:
      "Per day (UTC, oldest first): web call attempts with the key, calls started, refusals by error code " +
      "(`origin_not_allowed`, `invalid_captcha`, `rate_limited`, `plan_required`, `agent_unavailable`, " +
      "`plan_minutes_exhausted`, `minute_cap_reached` …) and minutes; over the period, the bot check's " +
      "scores in 11 buckets and the 10 most refused origins. Counted from the attempts themselves as they " +
      "are refused or started; a rate-limited attempt counts when its body carries the valid key.",
    id: { prefix: "key", example: KEY_ID, cli: { positional: "<key-id>" } },
    query: KeyStatsQuery,
    flags: { days: { value: "<1-90>", help: "Days to report, ending today (default 30)." } },
    response: { status: 200, description: "The key's attempts.", schema: KeyStatsSchema },
    errors: ["not_found"],
    run: (deps, id, query) => publishableKeyStats(deps, id, (query as { days: number }).days),
  },
  {
    name: "create-knowledge-base",
    method: "post",
    path: "/organizations/{id}/knowledge-bases",
    summary: "Create a knowledge base",
    description:
      "Creates an empty knowledge base in the organization; documents are added with " +
      "`POST /api/v1/knowledge-bases/{id}/documents`. Its `language` (BCP 47, optional) decides how its " +
      "documents are indexed and searched: French or English words are stemmed, others matched as written.",
    id: inOrganization,
    body: KnowledgeBaseInput,
    flags: {
      name: { value: "<text>", help: "Name of the knowledge base." },
      language: { value: "<bcp47-tag>", help: "Language of its documents, e.g. fr or en (default: none)." },
    },
    response: { status: 201, description: "The knowledge base.", schema: KnowledgeBaseSchema },
    errors: ["not_found"],
    run: (deps, id, body) => createKnowledgeBase(deps, id, body as z.output<typeof KnowledgeBaseInput>),
  },
  {
    name: "update-knowledge-base",
    method: "patch",
    path: "/knowledge-bases/{id}",
    summary: "Update a knowledge base",
    description:
      "Changes any of `name`, `language` (`null`: none); fields left out keep their value. A new language " +
      "indexes the knowledge base's documents again before this answers, so searches use it at once.",
    id: { prefix: "kb", example: "kb_01JD8Y3M6W9Q2T4V5X7Z8A9B0C", cli: { positional: "<kb-id>" } },
    body: KnowledgeBasePatch,
    flags: {
      name: { value: "<text>", help: "New name." },
      language: { value: "<bcp47-tag>", help: 'Language of its documents, e.g. fr; "" for none.' },
    },
    response: { status: 200, description: "The knowledge base.", schema: KnowledgeBaseSchema },
    errors: ["not_found"],
    run: (deps, id, body) => updateKnowledgeBase(deps, id, body as z.output<typeof KnowledgeBasePatch>),
  },
  {
    name: "list-failed-timers",
    method: "get",
    path: "/failed-timers",
    summary: "List work that gave up",
    description:
      "Lists the durable timers whose work failed until its retries ran out (kept as `failed` with the " +
      "number of attempts and the last error), newest first, in the cursor convention. `object` names what " +
      "the work was about. Retry one with `POST /failed-timers/{id}/retry` once the cause is fixed.",
    query: AdminListQuery,
    flags: listFlags,
    response: { status: 200, description: "One page of failed timers.", schema: FailedTimerListSchema },
    errors: ["invalid_query", "invalid_cursor"],
    run: (deps, _id, query) => listFailedTimers(deps, query as unknown as PageInput),
  },
  {
    name: "retry-failed-timer",
    method: "post",
    path: "/failed-timers/{id}/retry",
    summary: "Retry work that gave up",
    description:
      "Puts a failed timer back to work: pending, due now, its attempts counted from zero. The work is " +
      "fenced on the state it moves, so what was done meanwhile by other means is not done twice. A timer " +
      "that is not failed (unknown, already retried) is 404; a periodic kind of which one timer is already " +
      "pending is 400 `invalid_request`.",
    id: { prefix: "tmr", example: "tmr_01JDQ8Y3M6Q3VH8G2TD5KX7NAF", cli: { positional: "<timer-id>" } },
    response: { status: 200, description: "The timer, pending again.", schema: FailedTimerSchema },
    errors: ["not_found"],
    run: (deps, id) => retryFailedTimer(deps, id),
  },
];
