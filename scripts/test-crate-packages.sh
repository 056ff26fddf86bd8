#!/usr/bin/env bash
# The crates a registry gets: packages dlbridge, dlbridge-capi, dlbridge-pyo3 and dlbridge-napi
# together (`cargo package`: each is built from its .crate alone, the others' .crate files
# standing in for the registry), then checks what each ships: sources, the README, the C header
# and cbindgen.toml only, never tests, benches, fuzz corpora or other data. The .crate files stay
# in target/package (CARGO_TARGET_DIR honoured), where the docs test takes them from.
#
#   scripts/test-crate-packages.sh            package, verify and check the lists
#   scripts/test-crate-packages.sh --no-verify  package and check the lists only
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

# The published crates, dependencies first.
crates=(dlbridge dlbridge-capi dlbridge-pyo3 dlbridge-napi)
package_args=()
for crate in "${crates[@]}"; do
  package_args+=(-p "$crate")
done
verify=()
if [[ ${1:-} == --no-verify ]]; then verify=(--no-verify); fi

# --allow-dirty: a working tree with uncommitted edits packages what it holds (a clean clone,
# as in CI, is unaffected).
# Verification builds into target/registry-build, for the host target named explicitly: the
# documentation's tutorial crates and Rust blocks, which use the same .crate files, build there
# too (scripts/docs_blocks.py), with the same profile and target, and share the dependencies'
# builds.
# cargo verifies each package against the others through a local registry, and takes a
# registry crate for immutable: a version it unpacked (under $CARGO_HOME/registry/src/-<hash>/)
# or compiled before is never unpacked or compiled again, so a later run would verify against
# the previous run's sources. Our crates' unpacked copies, and the units compiled from them,
# are therefore removed first (a unit without its fingerprint is rebuilt). The units the
# tutorials build from their own unpacked copies (target/docs-crates/packages, which their
# dep-info names) stay: cargo checks those sources.
host=$(rustc -vV | sed -n 's/^host: //p')
verify_target=$TARGET_DIR/registry-build
for crate in "${crates[@]}"; do
  version=$(cargo pkgid -p "$crate" | sed 's/.*[#@]//')
  rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/"$crate-$version"
done
shopt -s nullglob
for fingerprint in "$verify_target"/{debug,"$host"/debug}/.fingerprint/dlbridge*; do
  grep -qa docs-crates/packages/ /dev/null "$fingerprint"/dep-* || rm -rf "$fingerprint"
done
shopt -u nullglob

log "cargo package ${crates[*]}"
CARGO_TARGET_DIR=$verify_target cargo package "${package_args[@]}" --locked --allow-dirty \
  --target "$host" "${verify[@]}" 2>&1 | grep -v "is not included in the published package" >&2
mkdir -p "$TARGET_DIR/package"
cp "$verify_target"/package/*.crate "$TARGET_DIR/package/"

# Every shipped path must match one of these (cargo adds the first four itself).
allowed='^(\.cargo_vcs_info\.json|Cargo\.toml|Cargo\.toml\.orig|Cargo\.lock|README\.md|src/.*\.rs|include/dlbridge\.h|cbindgen\.toml)$'
target_dir=${CARGO_TARGET_DIR:-$REPO_ROOT/target}
failed=0
for crate in "${crates[@]}"; do
  bad=0
  version=$(cargo pkgid -p "$crate" | sed 's/.*[#@]//')
  file=$target_dir/package/$crate-$version.crate
  [[ -f $file ]] || { log "FAIL $crate: no $file"; failed=$((failed + 1)); continue; }
  listing=$(tar -tzf "$file" | sed "s|^$crate-$version/||" | grep -v '/$')
  stray=$(grep -Ev "$allowed" <<<"$listing" || true)
  if [[ -n $stray ]]; then
    log "FAIL $crate ships files that are not sources: $(tr '\n' ' ' <<<"$stray")"
    bad=1
  fi
  for required in Cargo.toml README.md src/lib.rs; do
    grep -qx "$required" <<<"$listing" || { log "FAIL $crate: $required is not packaged"; bad=1; }
  done
  size=$(stat -c %s "$file")
  if ((size > 200 * 1024)); then
    log "FAIL $crate: $file is $size bytes (limit 200 KiB)"
    bad=1
  fi
  # The packaged manifest names its dependencies by version (the registry's), not by path.
  if tar -xzOf "$file" "$crate-$version/Cargo.toml" |
    awk '/^\[/ { dep = /dependencies/ } dep && /^path *=/ { found = 1 } END { exit !found }'; then
    log "FAIL $crate: its packaged Cargo.toml keeps a path dependency"
    bad=1
  fi
  if ((bad)); then
    failed=$((failed + 1))
  else
    log "ok $crate-$version.crate: $(wc -l <<<"$listing") files, $size bytes"
  fi
done
printf 'crates: %s passed, %s failed\n' "$((${#crates[@]} - failed))" "$failed"
((failed == 0))
