#!/usr/bin/env bash
# Runs the Mojo package's tests (bindings/mojo/tests/test_*.mojo) with the real Mojo toolchain
# (mojo-compiler, requirements/mojo.txt, in a cached venv), the release libdlbridge (located by
# DLBRIDGE_LIB) and the dlbridge wheel of the clone's overlay folder (on PYTHONPATH), with the
# python-test venv's interpreter (numpy, torch, jax) the one Mojo embeds (MOJO_PYTHON). Every
# suite is compiled into one program (bindings/mojo/tests/runner.mojo, the artifact
# mojo_programs), which runs each test file's suite in a process of its own; prints "N passed, M failed" summed over the suites,
# names each failed test, and exits nonzero if any test fails or a suite runs fewer tests than
# its file defines. Arguments select test files by name, e.g. `scripts/test/mojo.sh numpy` runs
# tests/test_numpy.mojo only.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need toolchains libdlbridge python_overlay mojo_programs

cd "$REPO_ROOT"
mojo_venv=$(ensure_venv mojo "$REPO_ROOT/requirements/mojo.txt")
python_venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")

export DLBRIDGE_LIB=$TARGET_DIR/release/libdlbridge.so
# This clone's dlbridge, from its overlay folder (the python-test venv is shared by every clone).
use_overlay

# mojo's bin holds the crashpad handler it looks for on PATH; MOJO_PYTHON picks the embedded
# interpreter (and with it numpy, torch, jax and dlbridge).
export PATH=$mojo_venv/bin:$PATH
export MOJO_PYTHON=$python_venv/bin/python

files=()
for file in bindings/mojo/tests/test_*.mojo; do
  name=$(basename "$file" .mojo)
  if (( $# == 0 )) || [[ " $* " == *" ${name#test_} "* || " $* " == *" $name "* ]]; then
    files+=("$file")
  fi
done
(( ${#files[@]} )) || { log "no test file matches: $*"; exit 1; }

runner=$MOJO_TEST_RUNNER

passed=0 failed=0 status=0 failures=()
for file in "${files[@]}"; do
  name=$(basename "$file" .mojo)
  log "DLBRIDGE_MOJO_SUITE=${name#test_} ${runner#"$REPO_ROOT/"} ($file)"
  output=$(DLBRIDGE_MOJO_SUITE=${name#test_} "$runner" 2>&1) || status=1
  printf '%s\n' "$output"
  # TestSuite's report ends with "Summary [ T ] N tests run: P passed , F failed , S skipped".
  summary=$(sed -nE 's/.* ([0-9]+) tests run: ([0-9]+) passed *, *([0-9]+) failed.*/\1 \2 \3/p' \
    <<<"$output" | tail -n 1)
  if [[ -z $summary ]]; then
    log "$file did not finish (no test summary): counted as one failure"
    failures+=("$file: did not finish")
    failed=$((failed + 1))
    status=1
    continue
  fi
  read -r n p f <<<"$summary"
  passed=$((passed + p))
  failed=$((failed + f))
  while read -r test; do
    failures+=("$file: $test")
  done < <(sed -nE 's/^ *FAIL \[ [0-9.]+ \] ([A-Za-z0-9_]+).*/\1/p' <<<"$output")
  # Every `def test_` of the file ran: the runner's suite is the file's whole suite.
  defined=$(grep -c '^def test_' "$file")
  if (( n != defined )); then
    failures+=("$file: $n tests ran, the file defines $defined")
    failed=$((failed + 1))
    status=1
  fi
done

for failure in "${failures[@]}"; do
  echo "FAILED $failure"
done
echo "$passed passed, $failed failed"
exit "$status"
