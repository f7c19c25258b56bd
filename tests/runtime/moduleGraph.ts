/**
 * The modules a process would load from an entry, read the way the runtime reads them (imports left
 * after types are erased, static and dynamic), and the ways they could tie it to one runtime.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const transpiler = new Bun.Transpiler({ loader: "ts" });

export interface ModuleEdge {
  from: string;
  to: string;
  dynamic: boolean;
}

/** Every local module reachable from `entry` (absolute paths), with the edges between them. */
export function moduleGraph(entry: string): {
  modules: Set<string>;
  edges: ModuleEdge[];
  bare: ModuleEdge[];
} {
  const modules = new Set<string>();
  const edges: ModuleEdge[] = [];
  const bare: ModuleEdge[] = [];
  const visit = (file: string) => {
    if (modules.has(file)) return;
    modules.add(file);
    if (!/\.[cm]?[jt]sx?$/.test(file)) return;
    for (const imp of transpiler.scanImports(readFileSync(file, "utf8"))) {
      const dynamic = imp.kind === "dynamic-import";
      if (!imp.path.startsWith(".")) {
        bare.push({ from: file, to: imp.path, dynamic });
        continue;
      }
      const target = resolve(dirname(file), imp.path);
      if (!existsSync(target)) throw new Error(`${file} imports ${imp.path}, which does not exist`);
      edges.push({ from: file, to: target, dynamic });
      visit(target);
    }
  };
  visit(resolve(entry));
  return { modules, edges, bare };
}

/** Import attributes a runtime reads alike: JSON modules and text. Anything else (Bun's `file`) is one runtime's. */
const PORTABLE_ATTRIBUTES = new Set(["json", "text"]);

/**
 * Why the modules reachable from `entry` would not run alike on every runtime, one line each: an
 * import of a module under `runtimeDir` other than its contract (`runtime.ts`), unless through
 * `gateway` (the one module allowed to pick an adapter); an import of `bun`, `bun:*` or `deno`; an
 * import attribute other than json or text. Paths in the lines are relative to `root`.
 */
export function runtimeViolations(opts: {
  entry: string;
  runtimeDir: string;
  root: string;
  gateway?: string;
}): string[] {
  const runtimeDir = resolve(opts.runtimeDir);
  const contract = join(runtimeDir, "runtime.ts");
  const gateway = opts.gateway ? resolve(opts.gateway) : null;
  const inRuntime = (f: string) => f.startsWith(`${runtimeDir}/`);
  const rel = (f: string) => relative(opts.root, f);
  const { modules, edges, bare } = moduleGraph(opts.entry);
  const problems: string[] = [];
  for (const e of edges) {
    if (inRuntime(e.from) || !inRuntime(e.to) || e.to === contract) continue;
    if (gateway && e.to === gateway) continue;
    problems.push(`${rel(e.from)} imports ${rel(e.to)}, a runtime adapter`);
  }
  for (const e of bare) {
    if (inRuntime(e.from)) continue;
    if (e.to === "bun" || e.to.startsWith("bun:") || e.to === "deno" || e.to.startsWith("jsr:")) {
      problems.push(`${rel(e.from)} imports ${e.to}, a runtime's own module`);
    }
  }
  for (const file of modules) {
    if (inRuntime(file) || !/\.[cm]?[jt]sx?$/.test(file)) continue;
    for (const m of readFileSync(file, "utf8").matchAll(/\bwith\s*\{\s*type\s*:\s*["']([^"']+)["']\s*\}/g)) {
      if (!PORTABLE_ATTRIBUTES.has(m[1]!)) {
        problems.push(`${rel(file)} imports with { type: "${m[1]}" }, which only one runtime reads`);
      }
    }
  }
  return problems;
}
