# Every dependency comes from Debian's packages (scripts/setup installs them).
find_package(OpenSSL REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(tl-expected REQUIRED)
find_package(Boost 1.74 REQUIRED)
if(NOT KCACHE_BUILD_SERVICE)
  return() # the client side needs nothing more
endif()
find_package(zstd REQUIRED)
find_package(RocksDB REQUIRED)
find_package(spdlog REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)
pkg_check_modules(LIBFFI REQUIRED IMPORTED_TARGET libffi)

# The CUDA Toolkit is optional: the compiler backends that need it are built
# only where it is found. Nothing at configure time needs a GPU.
find_package(CUDAToolkit QUIET)
if(CUDAToolkit_FOUND)
  message(STATUS "kcache: CUDA Toolkit ${CUDAToolkit_VERSION} (${CUDAToolkit_LIBRARY_DIR})")
else()
  message(STATUS "kcache: CUDA Toolkit not found; CUDA backends will not be built")
endif()

if(KCACHE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(KCACHE_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
