// Starts the API reference on /api/docs. A file of its own, not an inline script, so the page's
// Content-Security-Policy can forbid inline code. The document is read relative to the page, which
// keeps the page working behind a reverse proxy that adds a path prefix.
/* global SwaggerUIBundle */
document.body.style.margin = "0";
SwaggerUIBundle({
  url: new URL("openapi.json", window.location.href).href,
  dom_id: "#api-reference",
  deepLinking: true,
  // No request to the public validator service: the page talks only to this server.
  validatorUrl: null,
  // A key typed into "Authorize" lives only in this tab; it is never written to storage.
  persistAuthorization: false,
  displayRequestDuration: true,
  defaultModelsExpandDepth: 0,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
});
