# shellcheck shell=bash
# ELF helpers for scripts/package.sh (sourced): what a program needs from the system, which glibc
# it names, and carrying the shared libraries that a manylinux system is not promised to have.

# The manylinux core: libraries every glibc system has, which a wheel may need without carrying
# (PEP 600 and auditwheel's policies also allow more, e.g. libstdc++ up to a version; ddprun's
# programs link that statically, so anything outside this list is carried instead).
readonly ELF_SYSTEM_LIBS=" libc.so.6 libm.so.6 libdl.so.2 librt.so.1 libpthread.so.0 libutil.so.1
  ld-linux-x86-64.so.2 linux-vdso.so.1 "

# elf_is_elf FILE: true when FILE is an ELF object.
elf_is_elf() { [[ -f $1 && $(head -c4 "$1" | tr -d '\0') == $'\x7fELF' ]]; }

# elf_needed FILE: FILE's direct NEEDED sonames, one a line (none for a static program).
elf_needed() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

# elf_glibc_max FILE...: the highest GLIBC_x.y symbol version the files reference (objdump -T),
# e.g. "2.34"; empty when none does (static programs).
elf_glibc_max() {
  local f
  for f in "$@"; do objdump -T "$f" 2>/dev/null || true; done |
    grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/^GLIBC_//' | sort -uV | tail -n1
}

# elf_foreign_libs FILE: "soname path" for every library FILE loads (ldd: the whole closure)
# that is not in ELF_SYSTEM_LIBS. Fails naming the library when one cannot be found.
elf_foreign_libs() {
  local soname arrow path rest
  while read -r soname arrow path rest; do
    [[ $arrow == "=>" ]] || continue
    [[ $ELF_SYSTEM_LIBS == *" $soname "* ]] && continue
    if [[ $path == "not" ]]; then
      echo "package: $1 needs $soname, which is not found" >&2
      return 1
    fi
    echo "$soname $path"
  done < <(ldd "$1" 2>/dev/null || true)
}

# elf_carry_libs LIBDIR RPATH FILE...: copies the foreign libraries of each FILE into LIBDIR,
# gives each FILE that loads one the RUNPATH RPATH (e.g. '$ORIGIN/../lib/ddprun'), and the copies
# '$ORIGIN', so that they find each other. Prints the carried sonames.
elf_carry_libs() {
  local libdir=$1 rpath=$2 file soname path
  shift 2
  for file in "$@"; do
    local libs
    libs=$(elf_foreign_libs "$file") || return 1
    [[ -n $libs ]] || continue
    while read -r soname path; do
      if [[ ! -e $libdir/$soname ]]; then
        mkdir -p "$libdir"
        cp -L "$path" "$libdir/$soname"
        chmod 0755 "$libdir/$soname"
        # shellcheck disable=SC2016 # $ORIGIN is for the dynamic loader, not the shell
        patchelf --set-rpath '$ORIGIN' "$libdir/$soname"
        echo "$soname"
      fi
    done <<<"$libs"
    patchelf --set-rpath "$rpath" "$file"
  done
}
