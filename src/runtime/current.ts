import type { Runtime } from "./runtime.ts";

/**
 * The adapter of the runtime running this process. Imported on demand, so each runtime loads only its
 * own adapter: Deno could not even parse Bun's file imports, and Bun never needs Deno's.
 */
export async function currentRuntime(): Promise<Runtime> {
  if ("Deno" in globalThis) return (await import("./deno.ts")).denoRuntime;
  if ("Bun" in globalThis) return (await import("./bun.ts")).bunRuntime;
  throw new Error("voice-service runs on Bun (npm start) or Deno (npm run start:deno)");
}
