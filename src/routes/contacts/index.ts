import type { RouteRegistration } from "../../http/appEnv.ts";
import { registerCreateContact } from "./create.ts";
import { registerDeleteContact } from "./delete.ts";
import { registerGetContact } from "./get.ts";
import { registerListContacts } from "./list.ts";
import { registerUpdateContact } from "./update.ts";

export const contactRoutes: RouteRegistration[] = [
  registerCreateContact,
  registerListContacts,
  registerGetContact,
  registerUpdateContact,
  registerDeleteContact,
];
