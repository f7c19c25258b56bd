import { z } from "@hono/zod-openapi";
import type { Sql } from "postgres";
import { publishKeyChange } from "../auth/keyCache.ts";
import { generateKey } from "../auth/keys.ts";
import { SCOPES } from "../auth/scopes.ts";
import type { Clock } from "../clock.ts";
import type { Db } from "../db/engine/connection.ts";
import { ApiError } from "../errors.ts";
import { isId, newId } from "../ids.ts";

/** Organizations, agents, keys and knowledge bases: what operators create through the admin API or CLI. */

type Ctx = { sql: Sql; clock: Clock };

/**
 * Input schemas: the one validation of operator input, shared by the admin API (which also
 * documents them in the OpenAPI) and the CLI. All strict: an unknown field is an error.
 */
const Name = z.string().trim().min(1).max(200);
const PlanMinutes = z
  .number()
  .int()
  .min(0)
  .max(10_000_000)
  .openapi({ description: "Monthly allowance of live minutes.", example: 1000 });
const PaidPlan = z.boolean().openapi({ description: "Whether the organization has an active paid plan." });
const Language = z.enum(["en", "fr"]).openapi({ description: "Language the agent speaks." });
const LivekitAgentName = Name.nullable().openapi({
  description: "Agent name dispatched on the media server; `null` means the agent id.",
  example: "reception-bot",
});

export const OrganizationInput = z
  .object({
    name: Name.openapi({ example: "Acme" }),
    paidPlan: PaidPlan.default(false),
    planMinutes: PlanMinutes.default(0),
  })
  .strict()
  .openapi("CreateOrganizationRequest");

/** No defaults here: a field left out of a PATCH keeps its value. */
export const OrganizationPatch = z
  .object({ name: Name.openapi({ example: "Acme Inc." }), paidPlan: PaidPlan, planMinutes: PlanMinutes })
  .partial()
  .strict()
  .openapi("UpdateOrganizationRequest");

export const AgentInput = z
  .object({
    name: Name.openapi({ example: "Reception" }),
    active: z.boolean().default(true),
    livekitAgentName: LivekitAgentName.optional(),
    language: Language.default("en"),
  })
  .strict()
  .openapi("CreateAgentRequest");

export const AgentPatch = z
  .object({
    name: Name.openapi({ example: "Front desk" }),
    active: z.boolean(),
    livekitAgentName: LivekitAgentName,
    language: Language,
  })
  .partial()
  .strict()
  .openapi("UpdateAgentRequest");

export const ScopeSchema = z.enum([...SCOPES, "*"]).openapi({ description: "A scope, or `*` for all." });
export type GrantedScope = z.infer<typeof ScopeSchema>;

export const SecretKeyInput = z
  .object({
    mode: z
      .enum(["live", "test"])
      .openapi({ description: "`live` keys act for real; `test` keys simulate." }),
    scopes: z
      .array(ScopeSchema)
      .min(1)
      .openapi({ example: ["webcalls:write", "calls:write"] }),
    agentIds: z
      .array(z.string())
      .min(1)
      .nullable()
      .optional()
      .openapi({
        description: "Restricts the key to these agents of the organization. Omitted or `null`: every agent.",
        example: ["agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C"],
      }),
  })
  .strict()
  .openapi("CreateSecretKeyRequest");

/** An allowed website: an HTTPS origin, no wildcard, no path, query or credentials. Normalised to URL.origin. */
export const OriginSchema = z
  .string()
  .transform((value, ctx) => {
    let url: URL | null = null;
    try {
      url = new URL(value);
    } catch {}
    if (
      url?.protocol !== "https:" ||
      value.includes("*") ||
      url.username ||
      url.password ||
      url.pathname !== "/" ||
      url.search ||
      url.hash ||
      !/^https:\/\/[^/?#]+\/?$/i.test(value)
    ) {
      ctx.addIssue({
        code: "custom",
        message: `"${value}" is not an HTTPS origin such as https://www.example.com`,
      });
      return z.NEVER;
    }
    return url.origin;
  })
  .openapi({
    type: "string",
    description: "An HTTPS origin: scheme and host (and port), no wildcard, no path.",
    example: "https://www.example.com",
  });

export const PublishableKeyInput = z
  .object({
    agentId: z.string().openapi({ example: "agt_01JD8Y3M6W9Q2T4V5X7Z8A9B0C" }),
    allowedOrigins: z
      .array(OriginSchema)
      .min(1)
      .max(100)
      .openapi({ example: ["https://www.example.com", "https://shop.example.com"] }),
    monthlyMinuteCap: z.number().int().min(1).max(10_000_000).openapi({
      description: "Web call minutes this key may start per calendar month (UTC).",
      example: 500,
    }),
  })
  .strict()
  .openapi("CreatePublishableKeyRequest");

export const KnowledgeBaseInput = z
  .object({ name: Name.openapi({ example: "FAQ" }) })
  .strict()
  .openapi("CreateKnowledgeBaseRequest");

interface OrgRow {
  id: string;
  name: string;
  paid_plan: boolean;
  plan_minutes: number;
  created_at: Date;
}
export const organizationView = (r: OrgRow) => ({
  id: r.id,
  name: r.name,
  paidPlan: r.paid_plan,
  planMinutes: r.plan_minutes,
  createdAt: r.created_at.toISOString(),
});

interface AgentRowView {
  id: string;
  organization_id: string;
  name: string;
  active: boolean;
  livekit_agent_name: string | null;
  language: "en" | "fr";
  created_at: Date;
}
export const agentView = (r: AgentRowView) => ({
  id: r.id,
  organizationId: r.organization_id,
  name: r.name,
  active: r.active,
  livekitAgentName: r.livekit_agent_name,
  language: r.language,
  createdAt: r.created_at.toISOString(),
});

function notFound(what: string, param?: string): ApiError {
  return new ApiError("not_found", `No such ${what}.`, param ? { param } : {});
}

export async function createOrganization({ sql, clock }: Ctx, input: z.input<typeof OrganizationInput>) {
  const v = OrganizationInput.parse(input);
  const [row] = await sql<OrgRow[]>`
    insert into organizations (id, name, paid_plan, plan_minutes, created_at)
    values (${newId("org", clock)}, ${v.name}, ${v.paidPlan}, ${v.planMinutes}, ${clock.now()})
    returning *`;
  return organizationView(row!);
}

export async function updateOrganization({ sql }: Ctx, id: string, input: z.input<typeof OrganizationPatch>) {
  const v = OrganizationPatch.parse(input);
  if (!isId(id, "org")) throw notFound("organization");
  const [row] = await sql<OrgRow[]>`
    update organizations set
      name = coalesce(${v.name ?? null}, name),
      paid_plan = coalesce(${v.paidPlan ?? null}::boolean, paid_plan),
      plan_minutes = coalesce(${v.planMinutes ?? null}::integer, plan_minutes)
    where id = ${id} returning *`;
  if (!row) throw notFound("organization");
  publishKeyChange({ organizationId: id });
  return organizationView(row);
}

/** Every organization, newest first: a short list an operator reads. */
export async function listOrganizations({ sql }: Pick<Ctx, "sql">) {
  const rows = await sql<OrgRow[]>`select * from organizations order by created_at desc, id desc`;
  return { organizations: rows.map(organizationView) };
}

/** The agents of one organization, newest first, with the details operators need (ids for keys). */
export async function listAgentsOf({ sql }: Pick<Ctx, "sql">, organizationId: string) {
  await assertOrganization(sql, organizationId);
  const rows = await sql<AgentRowView[]>`
    select * from agents where organization_id = ${organizationId} order by created_at desc, id desc`;
  return { agents: rows.map(agentView) };
}

async function assertOrganization(sql: Db, id: string) {
  if (!isId(id, "org")) throw notFound("organization");
  const [row] = await sql`select 1 from organizations where id = ${id}`;
  if (!row) throw notFound("organization");
}

export async function createAgent(
  { sql, clock }: Ctx,
  organizationId: string,
  input: z.input<typeof AgentInput>,
) {
  const v = AgentInput.parse(input);
  await assertOrganization(sql, organizationId);
  const [row] = await sql<AgentRowView[]>`
    insert into agents (id, organization_id, name, active, livekit_agent_name, language, created_at)
    values (${newId("agt", clock)}, ${organizationId}, ${v.name}, ${v.active}, ${v.livekitAgentName ?? null},
            ${v.language}, ${clock.now()})
    returning *`;
  return agentView(row!);
}

export async function updateAgent({ sql }: Ctx, id: string, input: z.input<typeof AgentPatch>) {
  const v = AgentPatch.parse(input);
  if (!isId(id, "agt")) throw notFound("agent");
  const [row] = await sql<AgentRowView[]>`
    update agents set
      name = coalesce(${v.name ?? null}, name),
      active = coalesce(${v.active ?? null}::boolean, active),
      livekit_agent_name = ${"livekitAgentName" in v ? sql`${v.livekitAgentName ?? null}` : sql`livekit_agent_name`},
      language = coalesce(${v.language ?? null}, language)
    where id = ${id} returning *`;
  if (!row) throw notFound("agent");
  return agentView(row);
}

async function assertAgentsOf(sql: Db, organizationId: string, ids: string[], param: string) {
  const valid = ids.filter((id) => isId(id, "agt"));
  const rows = valid.length
    ? await sql<
        { id: string }[]
      >`select id from agents where organization_id = ${organizationId} and id = any(${valid})`
    : [];
  const found = new Set(rows.map((r) => r.id));
  const missing = ids.find((id) => !found.has(id));
  if (missing) throw notFound(`agent ${missing} in this organization`, param);
}

export async function createSecretKey(
  { sql, clock }: Ctx,
  organizationId: string,
  input: z.input<typeof SecretKeyInput>,
) {
  const v = SecretKeyInput.parse(input);
  await assertOrganization(sql, organizationId);
  const agentIds = v.agentIds ? [...new Set(v.agentIds)] : null;
  if (agentIds) await assertAgentsOf(sql, organizationId, agentIds, "agentIds");
  const scopes = [...new Set(v.scopes)];
  const k = await generateKey(v.mode);
  const id = newId("key", clock);
  const [row] = await sql<{ created_at: Date }[]>`
    insert into secret_keys (id, organization_id, mode, key_hash, start, scopes, agent_ids, created_at)
    values (${id}, ${organizationId}, ${v.mode}, ${k.hash}, ${k.start}, ${scopes}, ${agentIds}, ${clock.now()})
    returning created_at`;
  return {
    id,
    key: k.key,
    organizationId,
    mode: v.mode,
    scopes,
    agentIds,
    start: k.start,
    createdAt: row!.created_at.toISOString(),
  };
}

export async function createPublishableKey(
  { sql, clock }: Ctx,
  organizationId: string,
  input: z.input<typeof PublishableKeyInput>,
) {
  const v = PublishableKeyInput.parse(input);
  await assertOrganization(sql, organizationId);
  await assertAgentsOf(sql, organizationId, [v.agentId], "agentId");
  const origins = [...new Set(v.allowedOrigins)];
  const k = await generateKey("publishable");
  const id = newId("key", clock);
  const [row] = await sql<{ created_at: Date }[]>`
    insert into publishable_keys (id, organization_id, agent_id, key_hash, start, allowed_origins, monthly_minute_cap, created_at)
    values (${id}, ${organizationId}, ${v.agentId}, ${k.hash}, ${k.start}, ${origins}, ${v.monthlyMinuteCap}, ${clock.now()})
    returning created_at`;
  return {
    id,
    key: k.key,
    organizationId,
    agentId: v.agentId,
    allowedOrigins: origins,
    monthlyMinuteCap: v.monthlyMinuteCap,
    start: k.start,
    createdAt: row!.created_at.toISOString(),
  };
}

/** Revocation is idempotent: revoking twice keeps the first revocation time. */
export async function revokeSecretKey({ sql, clock }: Ctx, id: string) {
  if (!isId(id, "key")) throw notFound("secret key");
  const [row] = await sql<
    {
      id: string;
      organization_id: string;
      mode: "live" | "test";
      scopes: GrantedScope[];
      agent_ids: string[] | null;
      start: string;
      created_at: Date;
      revoked_at: Date;
    }[]
  >`
    update secret_keys set revoked_at = coalesce(revoked_at, ${clock.now()}) where id = ${id}
    returning id, organization_id, mode, scopes, agent_ids, start, created_at, revoked_at`;
  if (!row) throw notFound("secret key");
  publishKeyChange({ keyId: id });
  return {
    id: row.id,
    organizationId: row.organization_id,
    mode: row.mode,
    scopes: row.scopes,
    agentIds: row.agent_ids,
    start: row.start,
    createdAt: row.created_at.toISOString(),
    revoked: true as const,
    revokedAt: row.revoked_at.toISOString(),
  };
}

export async function revokePublishableKey({ sql, clock }: Ctx, id: string) {
  if (!isId(id, "key")) throw notFound("publishable key");
  const [row] = await sql<
    {
      id: string;
      organization_id: string;
      agent_id: string;
      allowed_origins: string[];
      monthly_minute_cap: number;
      start: string;
      created_at: Date;
      revoked_at: Date;
    }[]
  >`
    update publishable_keys set revoked_at = coalesce(revoked_at, ${clock.now()}) where id = ${id}
    returning id, organization_id, agent_id, allowed_origins, monthly_minute_cap, start, created_at, revoked_at`;
  if (!row) throw notFound("publishable key");
  return {
    id: row.id,
    organizationId: row.organization_id,
    agentId: row.agent_id,
    allowedOrigins: row.allowed_origins,
    monthlyMinuteCap: row.monthly_minute_cap,
    start: row.start,
    createdAt: row.created_at.toISOString(),
    revoked: true as const,
    revokedAt: row.revoked_at.toISOString(),
  };
}

export async function createKnowledgeBase(
  { sql, clock }: Ctx,
  organizationId: string,
  input: z.input<typeof KnowledgeBaseInput>,
) {
  const v = KnowledgeBaseInput.parse(input);
  await assertOrganization(sql, organizationId);
  const [row] = await sql<{ id: string; name: string; created_at: Date }[]>`
    insert into knowledge_bases (id, organization_id, name, created_at)
    values (${newId("kb", clock)}, ${organizationId}, ${v.name}, ${clock.now()})
    returning id, name, created_at`;
  return { id: row!.id, organizationId, name: row!.name, createdAt: row!.created_at.toISOString() };
}
