#!/usr/bin/env bash
# The npm packages as an application author installs them: the tarballs of target/dist, installed
# into an empty project on a PATH without cargo or rustc, run through the Node guide's Quick start
# there and type-checked against the installed types (scripts/check_npm_install.py).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need npm_tarballs
tarballs=("$TARGET_DIR"/dist/dlbridge-*.tgz)
((${#tarballs[@]} == 2)) || { log "target/dist holds ${#tarballs[@]} npm tarballs, not 2"; exit 1; }
log "installing ${tarballs[*]##*/} into an empty project (no cargo, no rustc on PATH)"
python3 "$REPO_ROOT/scripts/check_npm_install.py" "${tarballs[@]}"
