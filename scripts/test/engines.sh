#!/usr/bin/env bash
# dlbridge tensors through Ray's object store and a Dask LocalCluster of worker processes, in a
# cached venv of their own (requirements/engines.txt), with the clone's Python overlay folder:
# bindings/python/tests-engines, then the documentation's blocks that need the engines. Extra
# arguments go to pytest.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need test_venvs python_overlay
venv=$(ensure_venv engines "$REPO_ROOT/requirements/engines.txt")
use_overlay

log "running the engine tests (Ray, Dask)"
(cd "$REPO_ROOT/bindings/python" && "$venv/bin/python" -m pytest -q -p no:cacheprovider tests-engines "$@")

log "running the documentation's engine blocks"
REPO_ROOT=$REPO_ROOT DOCS_PYTHON=$venv/bin/python \
  "$venv/bin/python" "$REPO_ROOT/scripts/docs_blocks.py" --environment engines
