import type { App, Deps } from "../../deps.ts";
import { registerCancelCampaign } from "./cancel.ts";
import { registerCreateCampaign } from "./create.ts";
import { registerGetCampaign } from "./get.ts";
import { registerListCampaigns } from "./list.ts";

export const campaignRoutes: ((app: App, deps: Deps) => void)[] = [
  registerCreateCampaign,
  registerListCampaigns,
  registerGetCampaign,
  registerCancelCampaign,
];
