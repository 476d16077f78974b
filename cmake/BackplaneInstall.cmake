# BackplaneInstall.cmake: what `cmake --install` and `cpack -G DEB` add beyond
# the targets' own install rules (core/, plugins, tools/): the CMake package,
# the pkg-config files, the docs and the Debian package split.
#
# Components (one Debian package each, as Debian splits a library):
#   runtime  libbackplane.so.<major> and the plugins   -> libbackplane<major>
#   dev      headers, CMake package, .pc files, the .so link, the export
#            map, docs and examples                    -> libbackplane-dev
#   tools    bp-devices, bp-test-ops, bp-run, bp-bench -> backplane-tools
#   python   the Python module backplane (python/)      -> python3-backplane
include(CMakePackageConfigHelpers)

set(BP_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Backplane)

install(EXPORT BackplaneTargets NAMESPACE Backplane:: DESTINATION ${BP_CMAKE_INSTALL_DIR} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/BackplaneConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/BackplaneConfig.cmake
  INSTALL_DESTINATION ${BP_CMAKE_INSTALL_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR BP_PLUGIN_INSTALL_DIR)
# The SONAME changes with the major version, so only the same major is
# compatible (0.x included: 0.2 keeps libbackplane.so.0 only if it is).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/BackplaneConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/cmake/BackplaneConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/BackplaneConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/BackplanePlugin.cmake
  DESTINATION ${BP_CMAKE_INSTALL_DIR} COMPONENT dev)

# pkg-config: prefix is found from the .pc file's own folder (${pcfiledir}),
# so the files stay right when the install is moved.
set(BP_PKGCONFIG_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH BP_PC_TO_PREFIX /root/${BP_PKGCONFIG_INSTALL_DIR} /root)
string(REGEX REPLACE "/$" "" BP_PC_TO_PREFIX "${BP_PC_TO_PREFIX}")
foreach(pc backplane backplane-plugin)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/${pc}.pc DESTINATION ${BP_PKGCONFIG_INSTALL_DIR} COMPONENT dev)
endforeach()

install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT dev)
if(EXISTS ${PROJECT_SOURCE_DIR}/examples)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT dev)
endif()

# ---- Debian packages: cpack -G DEB (run in the build folder) -------------
set(CPACK_PACKAGE_NAME backplane)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "Backplane")
set(CPACK_PACKAGE_CONTACT "Backplane maintainers <backplane@example.org>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "tensor compute graphs on devices that come from plugins")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev tools)
if(BP_PYTHON_BUILT)
  list(APPEND CPACK_COMPONENTS_ALL python)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
# Depends on spdlog, libstdc++, OpenBLAS ... as dpkg-shlibdeps finds them, and
# a shlibs file so packages built against libbackplane get their Depends too.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# The tools need libbackplane.so.<major> from the runtime package, which is
# staged beside theirs (dpkg-shlibdeps runs in the component's staging folder).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ../runtime/usr/${CMAKE_INSTALL_LIBDIR})
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY "=")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libbackplane${PROJECT_VERSION_MAJOR})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "Backplane runtime library and device plugins (cpu, blas, ...)")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libbackplane-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DESCRIPTION "Backplane headers, CMake package, pkg-config files and plugin kit")
# Depends: libbackplane<major> (= version) for the packages built with it.
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_COMPONENT_DEV_DEPENDS runtime)
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME backplane-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)
set(CPACK_COMPONENT_TOOLS_DESCRIPTION "Backplane command-line tools: bp-devices, bp-test-ops, bp-run, bp-bench")
set(CPACK_COMPONENT_TOOLS_DEPENDS runtime)
# The module is built for the python3 it was configured with (its ABI tag is
# in the file name), and imports NumPy.
set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-backplane)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_COMPONENT_PYTHON_DESCRIPTION "Backplane for Python: the backplane module (tensors, graphs, devices, GGUF)")
set(CPACK_COMPONENT_PYTHON_DEPENDS runtime)
if(BP_PYTHON_BUILT)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS
      "python3 (>= ${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}), python3 (<< ${Python3_VERSION_MAJOR}.${BP_PY_NEXT_MINOR}), python3-numpy")
endif()
include(CPack)
