# shellcheck shell=bash
# The Debian package (sourced by scripts/package.sh): dist/ddprun_<version>_amd64.deb from the
# install tree under /usr, built with dpkg-deb. Its dependencies are the Debian packages that
# dpkg-shlibdeps finds for the programs and libddp, so they are named packages, never guesses.

# build_deb STAGE_ROOT VERSION OUT_DIR COMPRESSION: STAGE_ROOT holds usr/ (cmake --install,
# prefix /usr); COMPRESSION is dpkg-deb's -Z (xz, as Debian's archive, or gzip). Prints the
# package's path.
build_deb() {
  local root=$1 version=$2 out=$3 compression=$4
  local arch; arch=$(dpkg --print-architecture)
  mkdir -p "$root/DEBIAN"

  local elves unpackaged depends outside=""
  mapfile -t elves < <(deb_dynamic_elves "$root")
  unpackaged=$(deb_unpackaged_libs "$root" "${elves[@]}")
  depends=$(deb_shlib_depends "$root" "$unpackaged" "${elves[@]}") || die "dpkg-shlibdeps failed"
  if [[ -n $unpackaged ]]; then
    echo "package: no installed package owns ${unpackaged// /, }: not in Depends" >&2
    outside=$'\n .\n'" This build of libddp also loads ${unpackaged// /, }, which no Debian"
    outside+=$'\n'" package provides (the CUDA toolkit's and NCCL's): install them first."
  fi
  local size; size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
  cat >"$root/DEBIAN/control" <<CONTROL
Package: ddprun
Version: $version
Architecture: $arch
Maintainer: ddprun developers <ddprun@localhost>
Installed-Size: $size
Depends: $depends
Recommends: python3
Suggests: python3-torch, elfutils
Section: devel
Priority: optional
Description: native replacement for PyTorch's torchrun, with libddp
 ddprun takes torchrun's command line flag for flag and starts, supervises and
 restarts the workers of a data-parallel job (static, c10d and etcd rendezvous,
 SLURM). ddp-store is a store that speaks PyTorch's TCPStore protocol.
 libddp is the worker-side C++ runtime (find_package(ddp), pkg-config ddp).$outside
CONTROL

  # Python writes __pycache__ beside the package's modules when root imports them; dpkg does
  # not own those files, so the package removes them itself (as Debian's py3clean does).
  cat >"$root/DEBIAN/prerm" <<PRERM
#!/bin/sh
set -e
rm -rf /usr/$(python_install_dir)/ddprun/__pycache__
PRERM
  chmod 0755 "$root/DEBIAN/prerm"
  (cd "$root" && find usr -type f -print0 | sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"

  mkdir -p "$out"
  local deb=$out/ddprun_${version}_$arch.deb
  dpkg-deb --root-owner-group "-Z$compression" --build "$root" "$deb" >&2 || die "dpkg-deb failed"
  echo "$deb"
}

# deb_dynamic_elves ROOT: the ELF files under ROOT/usr that load shared libraries, one a line.
deb_dynamic_elves() {
  local file
  while IFS= read -r -d '' file; do
    if elf_is_elf "$file" && [[ -n $(elf_needed "$file") ]]; then echo "$file"; fi
  done < <(find "$1/usr" -type f -print0 | sort -z)
}

# deb_unpackaged_libs ROOT ELF...: the sonames the files need that no installed package owns
# (CUDA's and NCCL's under /usr/local/cuda, when the build found the toolkit), space-separated.
# Libraries in ROOT/usr/lib (libddp) are the package's own.
deb_unpackaged_libs() {
  local root=$1 soname patterns=()
  shift
  for soname in $(for file in "$@"; do elf_needed "$file"; done | sort -u); do
    [[ -e $root/usr/lib/$soname ]] || patterns+=("*/$soname")
  done
  # One query for all of them (each scans dpkg's whole file list); it names on stderr the
  # patterns that no package's file matches.
  # It exits 1 when a pattern matches nothing, the answer sought here.
  { dpkg-query -S "${patterns[@]}" 2>&1 >/dev/null || true; } |
    sed -n 's|^dpkg-query: no path found matching pattern \*/||p' | paste -sd' '
}

# deb_shlib_depends ROOT UNPACKAGED ELF...: the Depends line dpkg-shlibdeps finds for the files;
# with UNPACKAGED not empty, the libraries no package owns are left out of it.
deb_shlib_depends() {
  local root=$1 unpackaged=$2 work rc=0 ignore=()
  shift 2
  [[ -z $unpackaged ]] || ignore=(--ignore-missing-info)
  work=$(mktemp -d "${TMPDIR:-/tmp}/ddprun-shlibs.XXXXXX")
  mkdir "$work/debian"
  # dpkg-shlibdeps reads the source package's control file; one paragraph each is enough.
  printf 'Source: ddprun\n\nPackage: ddprun\nArchitecture: any\n' >"$work/debian/control"
  (cd "$work" && dpkg-shlibdeps -O "${ignore[@]}" "-l$root/usr/lib" "$@" >out 2>err) || rc=$?
  # It warns that the files are not yet where the package installs them: they are staged.
  grep -v "should already be installed in their package's directory" "$work/err" >&2 || true
  sed -n 's/^shlibs:Depends=//p' "$work/out"
  rm -rf "$work"
  return "$rc"
}
