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

  local depends
  deb_shlib_depends "$root" >"$root.depends" || die "dpkg-shlibdeps failed"
  depends=$(<"$root.depends") && rm -f "$root.depends"
  local outside=""
  if [[ -n $DEB_UNPACKAGED_LIBS ]]; then
    echo "package: no installed package owns ${DEB_UNPACKAGED_LIBS// /, }: not in Depends" >&2
    outside=$'\n .\n'" This build of libddp also loads ${DEB_UNPACKAGED_LIBS// /, }, which no"
    outside+=$'\n'" Debian package provides (the CUDA toolkit's and NCCL's): install them first."
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

# deb_shlib_depends ROOT: the Depends line for every dynamic ELF file under ROOT/usr. Libraries
# that no installed package owns (CUDA's and NCCL's under /usr/local/cuda, when the build found
# the toolkit) cannot be named as packages: they are left out of Depends and listed in
# DEB_UNPACKAGED_LIBS for the description instead.
deb_shlib_depends() {
  local root=$1 work file elves=() soname unpackaged=()
  while IFS= read -r -d '' file; do
    if elf_is_elf "$file" && [[ -n $(elf_needed "$file") ]]; then elves+=("$file"); fi
  done < <(find "$root/usr" -type f -print0)
  local patterns=()
  for soname in $(for file in "${elves[@]}"; do elf_needed "$file"; done | sort -u); do
    # The ddprun package's own libraries (libddp) are in ROOT, not yet owned by a package.
    [[ -e $root/usr/lib/$soname ]] || patterns+=("*/$soname")
  done
  # One query for all of them (each scans dpkg's whole file list): it names the patterns that
  # no package's file matches on stderr.
  mapfile -t unpackaged < <(dpkg-query -S "${patterns[@]}" 2>&1 >/dev/null |
    sed -n 's|^dpkg-query: no path found matching pattern \*/||p')
  DEB_UNPACKAGED_LIBS=${unpackaged[*]}
  local ignore=()
  ((${#unpackaged[@]} == 0)) || ignore=(--ignore-missing-info)
  work=$(mktemp -d "${TMPDIR:-/tmp}/ddprun-shlibs.XXXXXX")
  mkdir "$work/debian"
  # dpkg-shlibdeps reads the source package's control file; one paragraph each is enough.
  printf 'Source: ddprun\n\nPackage: ddprun\nArchitecture: any\n' >"$work/debian/control"
  (cd "$work" && dpkg-shlibdeps -O "${ignore[@]}" "-l$root/usr/lib" "${elves[@]}" 2>/dev/null) |
    sed -n 's/^shlibs:Depends=//p'
  local rc=${PIPESTATUS[0]}
  rm -rf "$work"
  return "$rc"
}
