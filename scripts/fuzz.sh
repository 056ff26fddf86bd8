#!/usr/bin/env bash
# Coverage-guided fuzzing with cargo-fuzz (nightly Rust, address sanitizer, debug assertions) of
# the targets in fuzz/: all of them, or those named as arguments. Not part of the test suite: the
# stable suite replays the committed corpora (fuzz/seeds/<target>/) instead.
#
# Budget per target: FUZZ_RUNS executions (default 10000000), optionally capped at FUZZ_SECONDS;
# inputs are at most FUZZ_MAX_LEN bytes (default: 128 for the importers, where every field of a
# 6-d tensor fits; 8192 for shm_open, whose seeds are whole 8 KiB segments).
# New inputs go to fuzz/corpus/<target>/ and crashes to fuzz/artifacts/<target>/ (both ignored
# by git); the seeds are read, never written. Prints one summary line per target.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cargo_fuzz_version=0.13.2
runs=${FUZZ_RUNS:-10000000}
seconds=${FUZZ_SECONDS:-0}

# The nightly toolchain (cargo-fuzz needs its sanitizer flags); the normal build stays on stable.
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal >&2

# cargo-fuzz in a cached, versioned folder, installed atomically (see ./just for the pattern).
fuzz_root=$DLBRIDGE_CACHE/tools/cargo-fuzz-$cargo_fuzz_version
if [[ ! -x $fuzz_root/bin/cargo-fuzz ]]; then
  mkdir -p "$DLBRIDGE_CACHE/tools"
  (
    flock 9 || exit 1
    if [[ ! -x $fuzz_root/bin/cargo-fuzz ]]; then
      log "installing cargo-fuzz $cargo_fuzz_version into $fuzz_root"
      tmp=$(mktemp -d "$DLBRIDGE_CACHE/tools/.cargo-fuzz.XXXXXX")
      cargo install --locked --quiet --root "$tmp" cargo-fuzz --version "=$cargo_fuzz_version" >&2
      rm -rf "$fuzz_root"
      mv -T "$tmp" "$fuzz_root"
    fi
  ) 9>"$fuzz_root.lock"
fi
export PATH=$fuzz_root/bin:$PATH

fuzz_dir=$REPO_ROOT/fuzz
if (( $# )); then
  targets=("$@")
else
  mapfile -t targets < <(cd "$fuzz_dir" && cargo +nightly fuzz list)
fi

summary=()
for target in "${targets[@]}"; do
  [[ -d $fuzz_dir/seeds/$target ]] || { log "no seed corpus fuzz/seeds/$target"; exit 1; }
  corpus=$fuzz_dir/corpus/$target
  mkdir -p "$corpus" "$fuzz_dir/artifacts/$target" "$fuzz_dir/target/logs"
  logfile=$fuzz_dir/target/logs/$target.log
  log "fuzzing $target: $runs runs (at most ${seconds}s if not 0); log in $logfile"
  case $target in
    shm_open) max_len=${FUZZ_MAX_LEN:-8192} ;;
    *) max_len=${FUZZ_MAX_LEN:-128} ;;
  esac
  args=(-runs="$runs" -max_len="$max_len" -print_final_stats=1)
  (( seconds > 0 )) && args+=(-max_total_time="$seconds")
  start=$(date +%s)
  status=0
  (cd "$fuzz_dir" && cargo +nightly fuzz run --debug-assertions "$target" \
      "$corpus" "$fuzz_dir/seeds/$target" -- "${args[@]}") >"$logfile" 2>&1 || status=$?
  elapsed=$(( $(date +%s) - start ))
  done_runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$logfile" | grep -oE '[0-9]+$' || echo 0)
  rate=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$logfile" | grep -oE '[0-9]+$' || echo 0)
  crashes=$(find "$fuzz_dir/artifacts/$target" -type f -newermt "@$start" | wc -l)
  summary+=("$target: $done_runs executions in ${elapsed}s ($rate exec/s), $crashes crashes, exit status $status")
  if (( status != 0 )); then
    tail -40 "$logfile" >&2
  fi
done
printf '%s\n' "${summary[@]}"
for line in "${summary[@]}"; do
  [[ $line == *", 0 crashes, exit status 0" ]] || exit 1
done
