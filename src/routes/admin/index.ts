import type { App, Deps } from "../../deps.ts";
import { registerAdminSecurityScheme } from "./auth.ts";
import { registerAdminCreateAgent } from "./createAgent.ts";
import { registerAdminCreateKnowledgeBase } from "./createKnowledgeBase.ts";
import { registerAdminCreateOrganization } from "./createOrganization.ts";
import { registerAdminCreatePublishableKey } from "./createPublishableKey.ts";
import { registerAdminCreateSecretKey } from "./createSecretKey.ts";
import { registerAdminRevokePublishableKey } from "./revokePublishableKey.ts";
import { registerAdminRevokeSecretKey } from "./revokeSecretKey.ts";
import { registerAdminUpdateAgent } from "./updateAgent.ts";
import { registerAdminUpdateOrganization } from "./updateOrganization.ts";

/** The operators' API of CONTRACT.md §3, under /api/admin/v1. Always registered and documented; gated at request time. */
export const adminRoutes: ((app: App, deps: Deps) => void)[] = [
  registerAdminSecurityScheme,
  registerAdminCreateOrganization,
  registerAdminUpdateOrganization,
  registerAdminCreateAgent,
  registerAdminUpdateAgent,
  registerAdminCreateSecretKey,
  registerAdminCreatePublishableKey,
  registerAdminRevokeSecretKey,
  registerAdminRevokePublishableKey,
  registerAdminCreateKnowledgeBase,
];
