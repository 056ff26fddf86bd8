#!/usr/bin/env bash
# Prints the bin folder of the project's own tools (requirements/tools.txt: just, uv), installing
# them on first use with pip into one venv, $DLBRIDGE_CACHE/tools/tools-<hash>, keyed by that file
# and the Python version. One venv and one pip run for both: creating a venv with pip costs about
# 5 CPU-s, a pip install about 3, and they run before anything else can start. ./just runs it before everything else, and scripts/lib.sh's
# ensure_uv uses it; a concurrent caller waits on the lock and uses what the first one installed.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
spec=$repo/requirements/tools.txt
cache=${DLBRIDGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dlbridge}
hash=$({ cat "$spec"; python3 --version; } | sha256sum | cut -c1-16)
venv=$cache/tools/tools-$hash

if [[ ! -e $venv/.complete ]]; then
  mkdir -p "$cache/tools"
  exec 9>"$venv.lock"
  flock 9
  if [[ ! -e $venv/.complete ]]; then
    printf '==> [%(%H:%M:%S)T] installing just and uv (%s) into %s\n' -1 "$spec" "$venv" >&2
    # Where python3 has pip (22.3 or later), it installs into a venv without pip of its own:
    # about half the time of creating the venv with pip.
    rm -rf "$venv"
    if ! { python3 -m venv --without-pip "$venv" &&
           python3 -m pip --python "$venv/bin/python" install -q --disable-pip-version-check \
             -r "$spec"; } 2>/dev/null
    then
      rm -rf "$venv"
      if ! { python3 -m venv "$venv" &&
             "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$spec"; } >&2
      then
        echo "tools.sh: could not install $spec into $venv" \
             "(needs python3 with the venv module and access to PyPI)" >&2
        exit 1
      fi
    fi
    touch "$venv/.complete"
  fi
fi
printf '%s\n' "$venv/bin"
