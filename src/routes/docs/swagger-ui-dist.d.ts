// The renderer's prebuilt files, imported as text: Bun and Deno read them so, and `bun build --compile` embeds them.
declare module "swagger-ui-dist/swagger-ui-bundle.js" {
  const text: string;
  export default text;
}
declare module "swagger-ui-dist/swagger-ui.css" {
  const text: string;
  export default text;
}
