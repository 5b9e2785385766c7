# `cmake --install` gives a harness::harness (and harness::cli) CMake package:
#   find_package(harness CONFIG REQUIRED) ; target_link_libraries(app PRIVATE harness::cli)
include_guard(GLOBAL)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS harness harness_report harness_history harness_cli EXPORT harnessTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/harness ${PROJECT_SOURCE_DIR}/bench
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(EXPORT harnessTargets NAMESPACE harness:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/harness)
install(FILES ${PROJECT_SOURCE_DIR}/cmake/LibTorch.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/harness)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/harnessConfig.cmake.in
  ${PROJECT_BINARY_DIR}/harnessConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/harness)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/harnessConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/harnessConfig.cmake ${PROJECT_BINARY_DIR}/harnessConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/harness)
