import type { RouteRegistration } from "../../http/appEnv.ts";
import { registerCreateWebCallSession } from "./create.ts";

export const webCallSessionRoutes: RouteRegistration[] = [registerCreateWebCallSession];
