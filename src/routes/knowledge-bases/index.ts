import type { RouteRegistration } from "../../http/appEnv.ts";
import { registerCreateDocument } from "./createDocument.ts";

export const knowledgeBaseRoutes: RouteRegistration[] = [registerCreateDocument];
