# shellcheck shell=bash
# The wheel (sourced by scripts/package.sh):
# dist/ddprun-<version>-py3-none-manylinux_<glibc>_x86_64.whl from the install tree, packed by
# Debian's python3-wheel (`python3 -m wheel pack`), offline.
#
# Layout, as pip installs it (the scripts and data schemes share one base, so $ORIGIN/../lib/ddprun
# from the programs reaches the carried libraries in a venv, a --user or a --prefix install):
#   ddprun/                              the Python package -> site-packages/ddprun
#   ddprun-V.data/scripts/               ddprun, ddprun-guard, ddp-store, ddprun-stacks and the
#                                        ddprun-launch script -> <prefix>/bin
#   ddprun-V.data/data/lib/ddprun/       carried shared libraries -> <prefix>/lib/ddprun
#   ddprun-V.dist-info/                  METADATA (the README as description), WHEEL (the tag)

readonly WHEEL_PROGRAMS=(ddprun ddprun-guard ddp-store ddprun-stacks)

# build_wheel STAGE_PREFIX VERSION OUT_DIR WORK_DIR: lays the wheel out in WORK_DIR (a new
# folder) and packs it. Prints the wheel's path.
build_wheel() {
  local prefix=$1 version=$2 out=$3 root=$4
  local data=$root/ddprun-$version.data info=$root/ddprun-$version.dist-info
  mkdir -p "$data/scripts" "$info"

  local python_dir; python_dir=$prefix/$(python_install_dir)
  [[ -f $python_dir/ddprun/__init__.py ]] || die "the install tree has no $python_dir/ddprun"
  cp -r "$python_dir/ddprun" "$root/ddprun"
  find "$root/ddprun" \( -name __pycache__ -o -name '*.pyc' \) -prune -exec rm -rf {} +

  local program elves=()
  for program in "${WHEEL_PROGRAMS[@]}"; do
    [[ -x $prefix/bin/$program ]] || die "the install tree has no bin/$program"
    cp "$prefix/bin/$program" "$data/scripts/$program"
    elves+=("$data/scripts/$program")
  done
  cp "$PACKAGE_DIR/ddprun-launch" "$data/scripts/ddprun-launch"

  local carried
  # shellcheck disable=SC2016 # $ORIGIN is for the dynamic loader, not the shell
  carried=$(elf_carry_libs "$data/data/lib/ddprun" '$ORIGIN/../lib/ddprun' "${elves[@]}") ||
    die "cannot carry the programs' shared libraries"
  [[ -z $carried ]] || elves+=("$data"/data/lib/ddprun/*)

  # The tag names the newest glibc any carried file needs: pip installs the wheel only where
  # glibc is at least that new (PEP 600).
  local glibc; glibc=$(elf_glibc_max "${elves[@]}")
  [[ -n $glibc ]] || die "no carried program names a GLIBC version (objdump -T)"
  local tag=py3-none-manylinux_${glibc/./_}_x86_64
  echo "package: wheel needs glibc $glibc; carries ${carried//$'\n'/ }" >&2

  write_wheel_metadata "$info" "$version" "$tag"
  mkdir -p "$out"
  /usr/bin/python3 -m wheel pack "$root" -d "$out" >&2 || die "python3 -m wheel pack failed"
  echo "$out/ddprun-$version-$tag.whl"
}

# write_wheel_metadata DIST_INFO VERSION TAG
write_wheel_metadata() {
  local info=$1 version=$2 tag=$3
  {
    printf 'Metadata-Version: 2.1\nName: ddprun\nVersion: %s\n' "$version"
    printf "Summary: A native replacement for PyTorch's torchrun, with its TCPStore store\n"
    printf 'Requires-Python: >=3.7\nDescription-Content-Type: text/markdown\n\n'
    cat "$SOURCE_DIR/README.md"
  } >"$info/METADATA"
  printf 'Wheel-Version: 1.0\nGenerator: ddprun scripts/package.sh\nRoot-Is-Purelib: false\n%s\n' \
    "Tag: $tag" >"$info/WHEEL"
}
