#!/usr/bin/env bash
# install-julia.sh [PREFIX]: installs Julia 1.5.3 from Debian bullseye's packages into PREFIX
# (default $DLBRIDGE_CACHE/julia-1.5.3) and prints the path of its `julia` launcher.
#
# No Julia >= 1.6 is reachable from these machines, but bullseye's julia 1.5.3 runs on bookworm
# when its packages are unpacked into a private prefix:
# - a private apt configuration (never /etc/apt) names the bullseye suite on the host's own
#   Debian mirror; apt resolves against the host's dpkg status read-only, so only the libraries
#   the host lacks are downloaded, and each .deb is unpacked with dpkg-deb -x;
# - Julia's private lib dir links to libraries the host already has: dangling links are
#   re-pointed at the host's copies;
# - bookworm's libunwind 1.6 makes every exception thrown from compiled code segfault, so
#   bullseye's libunwind8 is always unpacked too (the install check throws one on purpose);
# - a launcher script puts the prefix's library dirs on LD_LIBRARY_PATH.
# Idempotent: a prefix that passes the check is left alone.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

prefix=${1:-$DLBRIDGE_CACHE/julia-1.5.3}
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd -P)
launcher=$prefix/bin/julia
check='try; sqrt(-1.0); catch; end; exit(VERSION == v"1.5.3" ? 0 : 1)'

# installed: whether the prefix holds a Julia that passes the check.
installed() {
  [[ -x $launcher ]] && timeout 120 "$launcher" --startup-file=no -e "$check" >/dev/null 2>&1
}
if installed; then
  printf '%s\n' "$launcher"
  exit 0
fi

exec 9>"$prefix.lock"
flock 9
# Checked again under the lock: a concurrent caller may have installed it while we waited.
if installed; then
  printf '%s\n' "$launcher"
  exit 0
fi
log "installing Julia 1.5.3 into $prefix"
suite=bullseye
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo "$(uname -m)-linux-gnu")

apt_dir=$prefix/apt
root=$prefix/root
mkdir -p "$root" "$prefix/bin"
private_apt "$apt_dir" "$suite"
apt_opts=("${PRIVATE_APT_OPTIONS[@]}")
timeout 600 apt-get "${apt_opts[@]}" -qq update
timeout 1200 apt-get "${apt_opts[@]}" -qq -y --download-only install julia >/dev/null
(cd "$apt_dir/cache/archives" && timeout 600 apt-get "${apt_opts[@]}" -qq download "libunwind8/$suite")
shopt -s nullglob
debs=("$apt_dir"/cache/archives/*.deb)
(( ${#debs[@]} )) || { log "no .deb was downloaded"; exit 1; }
for deb in "${debs[@]}"; do dpkg-deb -x "$deb" "$root"; done

# Re-point links into the prefix that dangle (the host has those libraries) at the host's copy.
find "$root" -xtype l -print0 | while IFS= read -r -d '' link; do
  target=$(realpath -m "$link")
  name=$(basename "$target")
  for host in /usr/lib/"$triplet"/"$name" /lib/"$triplet"/"$name" /usr/lib/"$name" /lib/"$name"; do
    if [[ -e $host ]]; then
      mkdir -p "$(dirname "$target")"
      ln -sfn "$host" "$target"
      break
    fi
  done
done

libdirs=$(cd "$root" && find . \( -name '*.so' -o -name '*.so.*' \) -printf '%h\n' |
  grep -v '/julia$\|/julia/' | sort -u | sed "s|^\.|$root|" | paste -sd:)
cat >"$launcher" <<SH
#!/bin/sh
export LD_LIBRARY_PATH="$libdirs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
exec "$root/usr/bin/julia" "\$@"
SH
chmod +x "$launcher"
rm -rf "$apt_dir/cache/archives"/*.deb
timeout 120 "$launcher" --startup-file=no -e "$check" || { log "Julia install check failed"; exit 1; }
printf '%s\n' "$launcher"
