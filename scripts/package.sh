#!/usr/bin/env bash
# Builds ddprun's packages from a built tree, offline: the wheel
# (dist/ddprun-<version>-py3-none-manylinux_<glibc>_x86_64.whl) and the Debian package
# (dist/ddprun_<version>_amd64.deb). Both come from one `cmake --install` of that tree.
#
# usage: scripts/package.sh [--build DIR] [--out DIR] [--fast] [wheel|deb|all]
#   --build DIR   a configured build tree (default: build/, configured with the default preset
#                 if it is missing); the programs are brought up to date, nothing else is built
#   --out DIR     where the packages go (default: dist/)
#   --fast        compress the .deb with gzip, not xz: same contents, a larger file, made in a
#                 fraction of the time (the package tests use it)
set -Eeuo pipefail
# A command that fails without a die() of its own still says where.
trap 'echo "package: failed: $BASH_COMMAND (line $LINENO)" >&2' ERR

SOURCE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PACKAGE_DIR=$SOURCE_DIR/scripts/package
build=$SOURCE_DIR/build
out=$SOURCE_DIR/dist
what=all
deb_compression=xz

die() { echo "package: $*" >&2; exit 1; }

while (($#)); do
  case $1 in
    --build) build=$(realpath -m "${2:?--build needs a directory}"); shift 2 ;;
    --out) out=$(realpath -m "${2:?--out needs a directory}"); shift 2 ;;
    --fast) deb_compression=gzip; shift ;;
    wheel | deb | all) what=$1; shift ;;
    -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

for tool in cmake readelf objdump patchelf dpkg-deb dpkg-shlibdeps; do
  command -v "$tool" >/dev/null || die "$tool is missing (bash scripts/setup.sh installs it)"
done
/usr/bin/python3 -c 'import wheel' 2>/dev/null ||
  die "python3-wheel is missing (bash scripts/setup.sh)"

source "$PACKAGE_DIR/elf.sh"
source "$PACKAGE_DIR/wheel.sh"
source "$PACKAGE_DIR/deb.sh"

# cache_value NAME: a value of the build tree's CMakeCache.txt.
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
python_install_dir() { cache_value DDP_INSTALL_PYTHONDIR; }

if [[ ! -f $build/CMakeCache.txt ]]; then
  [[ $build == "$SOURCE_DIR/build" ]] || die "--build $build is not a configured build tree"
  (cd "$SOURCE_DIR" && cmake --preset default) >&2
fi
# Only what the packages carry; the tests and benchmarks stay as they are.
cmake --build "$build" --target ddprun ddprun-guard ddp-store ddprun-stacks ddp >&2
version=$(cache_value CMAKE_PROJECT_VERSION)
[[ -n $version ]] || die "$build/CMakeCache.txt names no CMAKE_PROJECT_VERSION"
[[ -n $(python_install_dir) ]] ||
  die "$build was configured before DDP_INSTALL_PYTHONDIR existed: reconfigure it"

# Scratch space for both packages, removed however the script ends.
work=$(mktemp -d "${TMPDIR:-/tmp}/ddprun-package.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/root
DESTDIR=$stage cmake --install "$build" --prefix /usr --strip >/dev/null

if [[ $what == wheel || $what == all ]]; then
  build_wheel "$stage/usr" "$version" "$out" "$work/wheel"
fi
if [[ $what == deb || $what == all ]]; then
  build_deb "$stage" "$version" "$out" "$deb_compression"
fi
