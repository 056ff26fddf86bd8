#!/usr/bin/env bash
# julia-build-env.sh: prints the `export` lines that let cargo build crates embedding Julia
# through jlrs (bindings/julia/dlbridge-julia); use it as `eval "$(scripts/julia-build-env.sh)"`.
#
# jlrs's jl-sys runs bindgen on julia.h at build time, so besides Julia itself
# (scripts/install-julia.sh) a build needs:
# - julia.h: bullseye's `libjulia-dev`, the same version as the installed julia package;
# - libclang for bindgen: bookworm's `libclang1-14` and `libclang-common-14-dev` (the latter has
#   clang's own headers, such as stddef.h).
# They are unpacked with dpkg-deb -x into $DLBRIDGE_CACHE/julia-1.5.3-dev, fetched through a
# private apt configuration (never /etc/apt) on the host's own Debian mirror. jl-sys looks for
# `include/julia/julia.h` and `lib/libjulia.so` under JULIA_DIR: JULIA_DIR is a folder of links
# into the unpacked headers and Julia's private library folder.
# Idempotent: a complete unpack (its .complete marker) is reused.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

julia=$("$REPO_ROOT/scripts/install-julia.sh")
julia_prefix=$(dirname "$(dirname "$julia")")
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo "$(uname -m)-linux-gnu")
julia_root=$julia_prefix/root
julia_lib=$julia_root/usr/lib/$triplet

dev=$DLBRIDGE_CACHE/julia-1.5.3-dev
root=$dev/root
julia_dir=$dev/julia-dir
llvm=$root/usr/lib/llvm-14

if [[ ! -e $dev/.complete ]]; then
  mkdir -p "$dev"
  exec 9>"$dev.lock"
  flock 9
fi
if [[ ! -e $dev/.complete ]]; then
  log "unpacking julia.h and libclang into $dev"
  apt_dir=$dev/apt
  rm -rf "$root" "$julia_dir" "$apt_dir"
  mkdir -p "$root"
  private_apt "$apt_dir" bullseye bookworm
  apt_opts=("${PRIVATE_APT_OPTIONS[@]}")
  timeout 600 apt-get "${apt_opts[@]}" -qq update
  # Exactly these packages, without their dependencies: the headers need nothing, and libclang's
  # libraries (libLLVM-14, ...) are checked below.
  (cd "$apt_dir/cache/archives" &&
    timeout 600 apt-get "${apt_opts[@]}" -qq download \
      libjulia-dev/bullseye libclang1-14/bookworm libclang-common-14-dev/bookworm)
  for deb in "$apt_dir"/cache/archives/*.deb; do dpkg-deb -x "$deb" "$root"; done
  rm -rf "$apt_dir"

  [[ -f $root/usr/include/julia/julia.h ]] || { log "libjulia-dev has no julia/julia.h"; exit 1; }
  libclang=$(find "$llvm/lib" -maxdepth 1 -name 'libclang.so*' -print -quit)
  [[ -n $libclang ]] || { log "libclang1-14 has no libclang.so in $llvm/lib"; exit 1; }
  if ldd "$libclang" | grep -q 'not found'; then
    log "libclang needs libraries this machine lacks: $(ldd "$libclang" | grep 'not found' | tr -s ' \n' ' ')"
    exit 1
  fi

  mkdir -p "$julia_dir/lib"
  ln -sfn "$root/usr/include" "$julia_dir/include"
  for lib in "$julia_lib"/*; do ln -sfn "$lib" "$julia_dir/lib/$(basename "$lib")"; done
  ln -sfn "$julia_lib/libjulia.so.1" "$julia_dir/lib/libjulia.so"
  touch "$dev/.complete"
fi

clang_include=$(find "$llvm/lib/clang" -mindepth 2 -maxdepth 2 -name include -type d | head -1)
cat <<SH
export JULIA_DIR='$julia_dir'
export LIBCLANG_PATH='$llvm/lib'
export BINDGEN_EXTRA_CLANG_ARGS='-isystem $clang_include'
export DLBRIDGE_JULIA_LIB='$julia_lib'
export DLBRIDGE_JULIA_BINDIR='$julia_root/usr/bin'
export DLBRIDGE_JULIA_IMAGE='$julia_lib/julia/sys.so'
SH
