#!/usr/bin/env bash
# mojo-build.sh OUTPUT SOURCE [MOJO_BUILD_ARGS...]: compiles the Mojo program SOURCE into the
# executable OUTPUT with `mojo build` (the `mojo` first on PATH), unless OUTPUT was already built
# from the same inputs: the toolchain, the arguments, and every .mojo file of the dlbridge
# package (bindings/mojo), of SOURCE's folder and of each `-I` folder (OUTPUT.key holds their
# hash). A rebuild costs tens of seconds and a reuse nothing, so the test scripts compile each
# program once and run it as often as they need. Concurrent callers wait for each other.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

(( $# >= 2 )) || { log "usage: mojo-build.sh OUTPUT SOURCE [MOJO_BUILD_ARGS...]"; exit 2; }
output=$1 source=$2
shift 2
mojo=$(command -v mojo) || { log "mojo-build.sh: no mojo on PATH"; exit 1; }

folders=("$REPO_ROOT/bindings/mojo" "$(dirname "$source")")
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  [[ ${args[i]} == -I ]] && folders+=("${args[i + 1]}")
done
key=$({
  printf '%s\n' "$mojo" "$source" "$@"
  find "${folders[@]}" -name '*.mojo' -print0 | sort -zu | xargs -0 sha256sum
} | sha256sum | cut -c1-16)

mkdir -p "$(dirname "$output")"
exec 9>"$output.lock"
flock 9
if [[ -x $output && -f $output.key && $(<"$output.key") == "$key" ]]; then
  exit 0
fi
log "mojo build $source -> $output"
rm -f "$output.key"
mojo build "$@" "$source" -o "$output" >&2
printf '%s\n' "$key" >"$output.key"
