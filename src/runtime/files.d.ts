// Files imported with `with { type: "file" }`: Bun hands back their path (inside the executable once compiled).
declare module "*.wasm" {
  const path: string;
  export default path;
}
declare module "*.data" {
  const path: string;
  export default path;
}
