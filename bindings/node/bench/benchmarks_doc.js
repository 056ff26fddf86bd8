'use strict';
// Writes a benchmark's section of docs/benchmarks.md (shared by the package's benchmark and the
// napi example's).

const fs = require('node:fs');
const path = require('node:path');

/** docs/benchmarks.md at the repository root. */
const DOC = path.join(__dirname, '..', '..', '..', 'docs', 'benchmarks.md');

/**
 * Replaces (or appends) the `name` section of docs/benchmarks.md, between its
 * `<!-- begin name -->` and `<!-- end name -->` markers, with `text`; returns the file's path.
 */
function writeSection(name, text) {
  const begin = `<!-- begin ${name} -->`;
  const end = `<!-- end ${name} -->`;
  const block = `${begin}\n${text.trimEnd()}\n${end}`;
  let current = fs.existsSync(DOC)
    ? fs.readFileSync(DOC, 'utf8')
    : '# Benchmarks\n\nRatios are measured in one run, on one machine.\n';
  const start = current.indexOf(begin);
  const stop = current.indexOf(end);
  if (start >= 0 && stop > start) {
    current = current.slice(0, start) + block + current.slice(stop + end.length);
  } else {
    current = `${current.trimEnd()}\n\n${block}\n`;
  }
  fs.mkdirSync(path.dirname(DOC), { recursive: true });
  fs.writeFileSync(DOC, current);
  return DOC;
}

module.exports = { writeSection };
