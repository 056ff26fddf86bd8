'use strict';
// index.d.ts: the dtype → typed-array mapping is visible to TypeScript (type-level tests in
// types/dtype-mapping.ts, compiled with the TypeScript the dev dependencies install).

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

test('index.d.ts infers typed arrays from dtypes and rejects mismatches', () => {
  const tsc = require.resolve('typescript/bin/tsc');
  const source = path.join(__dirname, 'types', 'dtype-mapping.ts');
  const args = [tsc, '--noEmit', '--strict', '--target', 'es2022', '--module', 'nodenext',
    '--moduleResolution', 'nodenext', source];
  try {
    execFileSync(process.execPath, args, { encoding: 'utf8', stdio: 'pipe' });
  } catch (error) {
    assert.fail(`tsc reported errors:\n${error.stdout}${error.stderr}`);
  }
});
