# Build options shared by every target: warnings, -Werror (CI), sanitizers.
option(DDP_WERROR "Treat warnings as errors" OFF)
option(DDP_UNITY_BUILD "Compile a target's C++ files as unity units where ddp_unity_build asks" ON)
set(DDP_SANITIZE "" CACHE STRING "Sanitizers: address (with undefined), thread, or undefined")

add_compile_options(
  "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wpedantic>"
  "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${DDP_WERROR}>>:-Werror>")
# GCC 12's flow warnings misfire once it inlines enough (-O2 and above, or under ASan), and -Werror
# would stop on them: Asio's coroutine frame (its own aligned operator new and sized delete) reads
# as a mismatched pair, and a std::variant holding a std::vector (the event log's values), or
# std::regex's std::function members (in Catch2's main), as maybe-uninitialized.
add_compile_options(
  "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-mismatched-new-delete;-Wno-maybe-uninitialized>")

# Optimisation: Release is -O2, the level Debian builds its packages at; most of the code waits on
# sockets and processes, and -O3 costs it compile time (a tenth more for an Asio coroutine file)
# for nothing. The numeric code (libddp, the collectives, the trainer) asks for -O3 with
# ddp_optimize_for_speed(); test programs take -O1 with ddp_optimize_for_build(), a third less
# compile time than -O3, which the CI budget needs (docs/testing.md).
string(REPLACE "-O3" "-O2" CMAKE_CXX_FLAGS_RELEASE "${CMAKE_CXX_FLAGS_RELEASE}")
string(REPLACE "-O3" "-O2" CMAKE_C_FLAGS_RELEASE "${CMAKE_C_FLAGS_RELEASE}")

# ddp_optimize_for_speed(target...): -O3 in Release, for code whose speed is measured.
function(ddp_optimize_for_speed)
  foreach(target ${ARGN})
    target_compile_options(${target} PRIVATE "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:Release>>:-O3>")
  endforeach()
endfunction()

# ddp_optimize_for_build(target...): -O1 in Release, for test programs, whose speed is not
# measured: still optimised enough for GCC's flow warnings, a third less compile time than -O3.
function(ddp_optimize_for_build)
  foreach(target ${ARGN})
    target_compile_options(${target} PRIVATE "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:Release>>:-O1>")
  endforeach()
endfunction()

# ddp_unity_build(target [BATCH n]): compiles the target's C++ files as unity translation units
# (CMake's UNITY_BUILD), so the headers they share (Asio, Beast, fmt, spdlog, JSON) are parsed
# and their templates instantiated once a unit instead of once a file. BATCH 0 (the default) puts
# every file in one unit; BATCH n, n files a unit, for a target big enough to keep two cores busy.
# File-local names must then be unique within the target (docs/testing.md). CUDA files stay out
# (CMake builds only C and C++ files as unity units). GCC's -Wsubobject-linkage, which is silent
# for a type of the compiled file's own anonymous namespace, warns once that file is #included
# into a unit; each file is included into exactly one unit, once, so it is silenced there.
# -DDDP_UNITY_BUILD=OFF compiles file by file (to see which file a message is about, or to time one).
function(ddp_unity_build target)
  if(NOT DDP_UNITY_BUILD)
    return()
  endif()
  cmake_parse_arguments(ARG "" "BATCH" "" ${ARGN})
  if(NOT DEFINED ARG_BATCH)
    set(ARG_BATCH 0)
  endif()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${ARG_BATCH})
  target_compile_options(${target} PRIVATE
    "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-subobject-linkage>")
endfunction()

if(DDP_SANITIZE STREQUAL "address")
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined;-fno-omit-frame-pointer>")
  add_link_options(-fsanitize=address,undefined)
elseif(DDP_SANITIZE STREQUAL "thread")
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=thread>")
  add_link_options(-fsanitize=thread)
elseif(DDP_SANITIZE STREQUAL "undefined")
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=undefined>")
  add_link_options(-fsanitize=undefined)
elseif(NOT DDP_SANITIZE STREQUAL "")
  message(FATAL_ERROR "DDP_SANITIZE must be address, thread or undefined, not '${DDP_SANITIZE}'")
endif()

# ddp_link_static(target): links a small helper program statically (no dynamic loading when it
# starts), except under sanitizers, whose runtimes cannot be linked statically.
function(ddp_link_static target)
  if(DDP_SANITIZE STREQUAL "")
    target_link_options(${target} PRIVATE -static)
  endif()
endfunction()

# ddp_static_runtime(target): a program that starts often and must start fast (ddprun: 1,024 of
# them start at once in a large rendezvous) gets libstdc++, libgcc, spdlog and fmt linked in, so
# that only glibc is loaded at start: the dynamic loader's symbol lookups and relocations were a
# fifth of a ddprun agent's CPU time. glibc stays shared (name lookups need its NSS modules).
# Sanitizer builds keep the shared libraries.
function(ddp_static_runtime target)
  if(DDP_SANITIZE STREQUAL "")
    set_target_properties(${target} PROPERTIES DDP_STATIC_RUNTIME ON)
    target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc)
  endif()
endfunction()
