import type { RouteRegistration } from "../../http/appEnv.ts";
import { registerStartWebCall } from "./create.ts";

/** `POST /api/v1/web-calls`, the one route a web page calls. */
export const webCallRoutes: RouteRegistration[] = [registerStartWebCall];
