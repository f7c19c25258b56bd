import type { RouteRegistration } from "../../http/appEnv.ts";
import { registerDeleteTask } from "./delete.ts";
import { registerListTasks } from "./list.ts";

export const taskRoutes: RouteRegistration[] = [registerListTasks, registerDeleteTask];
