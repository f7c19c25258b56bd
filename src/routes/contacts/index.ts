import type { App, Deps } from "../../deps.ts";
import { registerCreateContact } from "./create.ts";
import { registerDeleteContact } from "./delete.ts";
import { registerGetContact } from "./get.ts";
import { registerListContacts } from "./list.ts";
import { registerUpdateContact } from "./update.ts";

export const contactRoutes: ((app: App, deps: Deps) => void)[] = [
  registerCreateContact,
  registerListContacts,
  registerGetContact,
  registerUpdateContact,
  registerDeleteContact,
];
