#!/usr/bin/env bash
# Prints the path of the core test venv (requirements/core.txt), building it on first use.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_venv core "$REPO_ROOT/requirements/core.txt"
