#!/usr/bin/env bash
# What each packaged crate ships (the .crate files of target/package, the artifact
# crate_packages, which `cargo package` verified by building each from its .crate alone):
# sources, the README, the C header and cbindgen.toml only, never tests, benches, fuzz corpora or
# other data; at most 200 KiB; dependencies named by version, never by path.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need crate_packages
cd "$REPO_ROOT"

# Every shipped path must match one of these (cargo adds the first four itself).
allowed='^(\.cargo_vcs_info\.json|Cargo\.toml|Cargo\.toml\.orig|Cargo\.lock|README\.md|src/.*\.rs|include/dlbridge\.h|cbindgen\.toml)$'
failed=0
for crate in "${PUBLISHED_CRATES[@]}"; do
  bad=0
  version=$(cargo pkgid -p "$crate" | sed 's/.*[#@]//')
  file=$TARGET_DIR/package/$crate-$version.crate
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
printf 'crates: %s passed, %s failed\n' "$((${#PUBLISHED_CRATES[@]} - failed))" "$failed"
((failed == 0))
