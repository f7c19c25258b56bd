import type { App } from "../deps.ts";

/** `/api/openapi.json` (OpenAPI 3.1). The `/api/docs` page is added with its bundled assets. */
export function registerDocs(app: App) {
  app.openAPIRegistry.registerComponent("securitySchemes", "secretKey", {
    type: "http",
    scheme: "bearer",
    description: "A secret key, `inf_live_…` or `inf_test_…`. Never place it in a web page.",
  });
  app.doc31("/api/openapi.json", {
    openapi: "3.1.0",
    info: {
      title: "Voice agent service API",
      version: "1.0.0",
      description:
        "Web calls, single-use session tokens, test mode (`inf_test_` keys) and cursor-paginated lists. " +
        "Errors share one envelope: `{error: {code, message, param?, requestId}}`.",
    },
    servers: [{ url: "/" }],
  });
}
