# `cmake --install` (all components, or --component NAME):
#  - client: libkcache.so (the C ABI), the C++ client libraries and their
#    headers and a CMake package, so a trainer's build does find_package(kcache)
#    and links kcache::client (C++) or kcache::kcache (C);
#  - cli: the kcache inspection CLI;
#  - service: kcached and kcache-worker (kcached finds the worker beside it).
# A trainer node builds with -DKCACHE_BUILD_SERVICE=OFF: client and cli only.
include(CMakePackageConfigHelpers)

set_target_properties(kcache_protocol PROPERTIES EXPORT_NAME protocol)
set_target_properties(kcache_cachekey PROPERTIES EXPORT_NAME cachekey)
set_target_properties(kcache_client PROPERTIES EXPORT_NAME client)

install(TARGETS kcache_protocol kcache_cachekey kcache_client kcache
  EXPORT kcacheTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT client
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT client NAMELINK_COMPONENT client)
install(TARGETS kcache_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
install(DIRECTORY client/include/ protocol/include/ cachekey/include/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT client)

set(kcache_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/kcache)
install(EXPORT kcacheTargets NAMESPACE kcache:: DESTINATION ${kcache_cmake_dir}
  COMPONENT client)
configure_package_config_file(cmake/kcacheConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/kcacheConfig.cmake INSTALL_DESTINATION ${kcache_cmake_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/kcacheConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/kcacheConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/kcacheConfigVersion.cmake
  DESTINATION ${kcache_cmake_dir} COMPONENT client)

if(KCACHE_BUILD_SERVICE)
  install(TARGETS kcached kcache-worker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
    COMPONENT service)
endif()

# The Python wheel (client/python/pyproject.toml, scikit-build-core sets
# SKBUILD): libkcache.so inside the kcache package, where kcache._native looks
# first, as one file (a wheel cannot hold the SONAME links); the KCACHE_TORCH=1
# switch at site-packages' root, where Python reads .pth files.
if(SKBUILD)
  install(FILES $<TARGET_FILE:kcache> DESTINATION kcache RENAME libkcache.so COMPONENT python)
  install(FILES client/python/_kcache_autoenable.py client/python/kcache_torch_autoenable.pth
    DESTINATION . COMPONENT python)
endif()
