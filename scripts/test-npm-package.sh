#!/usr/bin/env bash
# The npm packages as an application author installs them: builds the tarballs (`./just dist`'s
# Node part, scripts/dist-node.sh, into target/dist), installs them into an empty project on a
# PATH without cargo or rustc, runs the Node guide's Quick start there and type-checks against
# the installed types (scripts/check_npm_install.py).
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Inside `./just test`, scripts/build.sh has written them already.
if prebuilt; then
  tarballs=("$TARGET_DIR"/dist/dlbridge-*.tgz)
else
  mapfile -t tarballs < <("$REPO_ROOT/scripts/dist-node.sh")
fi
((${#tarballs[@]} == 2)) || { log "dist-node.sh printed ${#tarballs[@]} tarballs, not 2"; exit 1; }
log "installing ${tarballs[*]##*/} into an empty project (no cargo, no rustc on PATH)"
python3 "$REPO_ROOT/scripts/check_npm_install.py" "${tarballs[@]}"
