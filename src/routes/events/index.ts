import type { RouteRegistration } from "../../http/appEnv.ts";
import { registerListEvents } from "./list.ts";

export const eventRoutes: RouteRegistration[] = [registerListEvents];
