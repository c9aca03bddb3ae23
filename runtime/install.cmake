# Installing libddp: the library, its public headers, exported targets (ddpTargets.cmake with
# ddp::ddp), ddpConfig.cmake + version file for find_package(ddp), and ddp.pc for pkg-config.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS ddp EXPORT ddpTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/ddp ${PROJECT_SOURCE_DIR}/common/include/ddp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp")
install(EXPORT ddpTargets NAMESPACE ddp:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ddp)

configure_package_config_file(cmake/ddpConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/ddpConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ddp)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ddpConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ddpConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/ddpConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ddp)

# ddp.pc finds its prefix relative to itself (${pcfiledir}), so an installed tree can be moved.
file(RELATIVE_PATH DDP_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
configure_file(cmake/ddp.pc.in ${CMAKE_CURRENT_BINARY_DIR}/ddp.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ddp.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
