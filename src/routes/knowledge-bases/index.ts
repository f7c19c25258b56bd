import type { RouteRegistration } from "../../http/appEnv.ts";
import { registerCreateDocument } from "./createDocument.ts";
import { registerDeleteDocument } from "./deleteDocument.ts";
import { registerGetDocument } from "./getDocument.ts";
import { registerListDocuments } from "./listDocuments.ts";
import { registerSearchKnowledgeBase } from "./search.ts";

export const knowledgeBaseRoutes: RouteRegistration[] = [
  registerCreateDocument,
  registerListDocuments,
  registerGetDocument,
  registerDeleteDocument,
  registerSearchKnowledgeBase,
];
