import type { RouteRegistration } from "../../http/appEnv.ts";
import { registerCancelCampaign } from "./cancel.ts";
import { registerCreateCampaign } from "./create.ts";
import { registerGetCampaign } from "./get.ts";
import { registerListCampaigns } from "./list.ts";

export const campaignRoutes: RouteRegistration[] = [
  registerCreateCampaign,
  registerListCampaigns,
  registerGetCampaign,
  registerCancelCampaign,
];
