#!/usr/bin/env bash
# Node frontend (bindings/node): install the npm dev dependencies from the lock (skipped when
# node_modules already matches it), build the addon in release mode with the suite's switches
# (feature `test-hooks`: `_testHooks`), run the node:test suite.
#
#   scripts/test-node.sh               install + build + test
#   scripts/test-node.sh --build-only  install + build (used by scripts/bench-node.sh)
#   scripts/test-node.sh FILE...       install + build + run only these test files
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT/bindings/node"

# npm ci wipes node_modules, so it runs only when the lock (or Node) changed since the last one.
# Locks carry no registry host (--omit-lockfile-registry-resolved): npm uses its configured one.
install_dependencies() {
  local stamp=node_modules/.dlbridge-install-stamp want
  local npm_flags=(--no-audit --no-fund --loglevel=error --omit-lockfile-registry-resolved)
  if [[ -f package-lock.json ]]; then
    want=$({ cat package-lock.json; node --version; } | sha256sum | cut -c1-16)
    if [[ -f $stamp && $(<"$stamp") == "$want" ]]; then
      return
    fi
    log "npm ci (bindings/node)"
    npm ci "${npm_flags[@]}"
  else
    log "npm install (bindings/node: no package-lock.json yet)"
    npm install "${npm_flags[@]}"
    want=$({ cat package-lock.json; node --version; } | sha256sum | cut -c1-16)
  fi
  printf '%s\n' "$want" >"$stamp"
}

install_dependencies
if ! prebuilt; then
  log "build the addon (cargo build --release -p dlbridge-node --features test-hooks)"
  node build-addon.js -- --locked --features test-hooks
fi

if [[ ${1:-} == --build-only ]]; then
  exit 0
fi
if (($#)); then
  tests=("$@")
else
  tests=(test/*.test.js test/*.test.mjs)
fi
log "node --test --expose-gc (${#tests[@]} files)"
node --test --expose-gc "${tests[@]}"
