# Install rules for what no target folder owns: the Python package `ddprun` and the docs. The
# programs' rules sit beside their targets (apps/*/CMakeLists.txt), libddp's in
# runtime/install.cmake. scripts/package.sh builds the wheel and the .deb from one install tree.
include(GNUInstallDirs)

# Debian's directory for modules of every python3 version; the .deb installs there (prefix /usr).
set(DDP_INSTALL_PYTHONDIR "lib/python3/dist-packages" CACHE STRING
    "Where the Python package ddprun is installed, relative to the install prefix")

# The whole folder, not a file list, so that modules added to python/ddprun/ are carried as they
# are (the agent embeds the same files: ddp_python_files in agent/CMakeLists.txt).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/ddprun DESTINATION ${DDP_INSTALL_PYTHONDIR}
        PATTERN "__pycache__" EXCLUDE PATTERN "*.pyc" EXCLUDE)

install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}
        FILES_MATCHING PATTERN "*.md")
# A project that builds against the installed libddp (find_package(ddp)), to copy from.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples DESTINATION ${CMAKE_INSTALL_DOCDIR})
