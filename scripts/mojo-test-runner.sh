#!/usr/bin/env bash
# Builds the Mojo package's test program (bindings/mojo/tests/runner.mojo: every suite of
# bindings/mojo/tests and bindings/mojo/tests-device in one binary) with the `mojo` first on PATH,
# unless it was built from the same sources already (scripts/mojo-build.sh), and prints its path.
# `DLBRIDGE_MOJO_SUITE=numpy "$runner"` runs tests/test_numpy.mojo's suite (see runner.mojo).
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$REPO_ROOT"
runner=${CARGO_TARGET_DIR:-$REPO_ROOT/target}/mojo/test-runner
"$REPO_ROOT/scripts/mojo-build.sh" "$runner" bindings/mojo/tests/runner.mojo \
  -I bindings/mojo -I bindings/mojo/tests-device
printf '%s\n' "$runner"
