import type { RouteRegistration } from "../../http/appEnv.ts";
import { registerCreateBlockedNumber } from "./create.ts";
import { registerDeleteBlockedNumber } from "./delete.ts";
import { registerListBlockedNumbers } from "./list.ts";

export const blockedNumberRoutes: RouteRegistration[] = [
  registerCreateBlockedNumber,
  registerListBlockedNumbers,
  registerDeleteBlockedNumber,
];
