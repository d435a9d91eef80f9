# Installs every layer library, its headers and a CMake package config, so
# that an outside project can write find_package(reprise) and link
# reprise::reprise.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

get_property(layer_targets GLOBAL PROPERTY REPRISE_LAYER_TARGETS)
install(TARGETS ${layer_targets} reprise EXPORT repriseTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION include/reprise)
install(EXPORT repriseTargets NAMESPACE reprise::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/reprise)

configure_package_config_file(cmake/repriseConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/repriseConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/reprise)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/repriseConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/repriseConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/repriseConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/reprise)
