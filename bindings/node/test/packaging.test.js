'use strict';
// The npm package: a stripped addon, and `npm pack` refusing to pack without one.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { elfSectionNames } = require('../check-addon');
const { writePlatformPackage } = require('../platform-package');
const { addonFileName, platformPackageName } = require('../platform');

const packageDir = path.join(__dirname, '..');
const addon = path.join(packageDir, addonFileName());

/** A copy of the package's own files (what `npm pack` reads) in a temporary folder. */
function packageCopy(withAddon) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dlbridge-pack-'));
  const files = ['package.json', 'index.js', 'index.mjs', 'index.d.ts', 'platform.js', 'README.md'];
  for (const file of [...files, 'check-addon.js']) {
    fs.copyFileSync(path.join(packageDir, file), path.join(dir, file));
  }
  if (withAddon) fs.copyFileSync(addon, path.join(dir, addonFileName()));
  return dir;
}

function npmPackDryRun(dir) {
  const args = ['pack', '--dry-run', '--json', '--loglevel=error'];
  return spawnSync('npm', args, { cwd: dir, encoding: 'utf8' });
}

test('the built addon carries no debug information', { skip: process.platform !== 'linux' }, () => {
  const sections = elfSectionNames(fs.readFileSync(addon));
  assert.ok(sections.includes('.text'), `${addon} has no .text section: not an ELF addon?`);
  assert.deepEqual(sections.filter((name) => name.startsWith('.debug')), []);
});

test('npm pack refuses a package folder without the addon', () => {
  const dir = packageCopy(false);
  try {
    const result = npmPackDryRun(dir);
    assert.notEqual(result.status, 0);
    assert.ok(result.stderr.includes(`no native addon ${addonFileName()}`), result.stderr);
    assert.match(result.stderr, /npm run build/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('npm pack ships the addon, the entry points and the types, nothing else', () => {
  const dir = packageCopy(true);
  try {
    const result = npmPackDryRun(dir);
    assert.equal(result.status, 0, result.stderr);
    const [packed] = JSON.parse(result.stdout);
    assert.deepEqual(packed.files.map((f) => f.path).sort(), [
      'README.md',
      addonFileName(),
      'index.d.ts',
      'index.js',
      'index.mjs',
      'package.json',
      'platform.js',
    ].sort());
    assert.ok(packed.unpackedSize < 4 * 1024 * 1024, `unpacked size ${packed.unpackedSize}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('the per-platform package carries the addon, and the main package loads it from there', () => {
  const project = fs.mkdtempSync(path.join(os.tmpdir(), 'dlbridge-app-'));
  try {
    const modules = path.join(project, 'node_modules');
    const folder = writePlatformPackage(path.join(project, 'npm'));
    const manifest = JSON.parse(fs.readFileSync(path.join(folder, 'package.json'), 'utf8'));
    const main = JSON.parse(fs.readFileSync(path.join(packageDir, 'package.json'), 'utf8'));
    assert.equal(manifest.name, platformPackageName());
    assert.equal(manifest.version, main.version);
    assert.equal(manifest.main, addonFileName());
    assert.deepEqual([manifest.os, manifest.cpu], [[process.platform], [process.arch]]);
    // An application's node_modules: the main package without an addon of its own, and the
    // platform package beside it.
    fs.mkdirSync(modules);
    fs.renameSync(packageCopy(false), path.join(modules, 'dlbridge'));
    fs.renameSync(folder, path.join(modules, platformPackageName()));
    const script = "const t = require('dlbridge').arange(3, 'int32'); console.log(`${t}`)";
    const run = spawnSync(process.execPath, ['-e', script], { cwd: project, encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    const described = "Tensor { dtype: 'int32', shape: [3], strides: [1], device: 'cpu:0' }";
    assert.equal(run.stdout.trim(), described);
    // Without either, the error names both places.
    fs.rmSync(path.join(modules, platformPackageName()), { recursive: true });
    const missing = spawnSync(process.execPath, ['-e', script], { cwd: project, encoding: 'utf8' });
    assert.notEqual(missing.status, 0);
    assert.ok(missing.stderr.includes(`no package ${platformPackageName()}`), missing.stderr);
  } finally {
    fs.rmSync(project, { recursive: true, force: true });
  }
});
