# Project-wide compile flags: strict warnings, and sanitizers when asked for.
# Applied through an interface target so third-party code is not affected.
add_library(kcache_build_flags INTERFACE)
target_compile_options(kcache_build_flags INTERFACE
  -Wall -Wextra -Werror -Wpedantic -Wshadow -Wnon-virtual-dtor
  -Wold-style-cast -Wcast-align -Woverloaded-virtual -Wimplicit-fallthrough)

if(KCACHE_SANITIZE)
  message(STATUS "kcache: building with AddressSanitizer + UBSan")
  set(_kcache_san -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_compile_options(kcache_build_flags INTERFACE ${_kcache_san})
  target_link_options(kcache_build_flags INTERFACE ${_kcache_san})
endif()

# With the fuzz targets in the build, every library is compiled with libFuzzer's
# coverage instrumentation so the fuzzers are guided by the parsers' own
# branches, not only by the harness file. The sanitizer runtime supplies the
# hooks for the ordinary test binaries.
if(KCACHE_FUZZ)
  target_compile_options(kcache_build_flags INTERFACE -fsanitize=fuzzer-no-link)
endif()

# GCC 12 reports -Wrestrict false positives inside libstdc++'s own string
# concatenation at -O2/-O3 (GCC bug 105651, fixed in 13); every
# `"literal" + std::string` trips it. Off for that compiler only.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(kcache_build_flags INTERFACE -Wno-restrict)
endif()

# clang's UBSan checks an indirect call's target type by reading a signature
# placed just before the callee (-fsanitize=function). Machine code kcache
# loads at run time (JIT'd objects, benchmarked kernels) has none, and a
# function at the start of its mapping faults on that read. Files that call
# such code say so here.
function(kcache_calls_loaded_code)
  if(KCACHE_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    set_source_files_properties(${ARGN} DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
      PROPERTIES COMPILE_OPTIONS -fno-sanitize=function)
  endif()
endfunction()
