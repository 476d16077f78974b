# bp_add_plugin(NAME SOURCES... [OUTPUT_DIR dir] [INSTALL_DIR dir] [NO_INSTALL])
#
# Builds libbp-<NAME>.so (target bp-<NAME>): a MODULE that exports only the two
# ABI symbols, links nothing of Backplane and must resolve every symbol at link
# time (-Wl,--no-undefined, so dlopen cannot fail later on a missing one).
#
# The same file serves the Backplane build and plugin authors: the installed
# package (find_package(Backplane)) includes it, and both get the compile and
# link flags from the Backplane::plugin interface target.
#   OUTPUT_DIR   where the .so is written (default: the Backplane build's
#                plugin folder in-tree, else CMake's default)
#   INSTALL_DIR  where `cmake --install` puts it (default: BP_PLUGIN_INSTALL_DIR,
#                else <libdir>/backplane/plugins of the installing project)
#   NO_INSTALL   no install rule (test fixtures)
function(bp_add_plugin name)
  cmake_parse_arguments(ARG "NO_INSTALL" "OUTPUT_DIR;INSTALL_DIR" "SOURCES" ${ARGN})
  if(NOT TARGET Backplane::plugin)
    message(FATAL_ERROR "bp_add_plugin: no Backplane::plugin target; call find_package(Backplane) first")
  endif()
  set(target bp-${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE Backplane::plugin)
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    OUTPUT_NAME bp-${name}
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  set(out ${BP_PLUGIN_OUTPUT_DIR})
  if(ARG_OUTPUT_DIR)
    set(out ${ARG_OUTPUT_DIR})
  endif()
  if(out)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${out})
  endif()
  # Sanitizer runtimes are resolved by the host process, not the plugin.
  if(NOT BP_SANITIZE)
    target_link_options(${target} PRIVATE -Wl,--no-undefined)
  endif()
  # Static libraries linked in must not re-export their symbols either.
  target_link_options(${target} PRIVATE -Wl,--exclude-libs,ALL)
  if(NOT ARG_NO_INSTALL)
    set(dest ${ARG_INSTALL_DIR})
    if(NOT dest)
      set(dest ${BP_PLUGIN_INSTALL_DIR})
    endif()
    if(NOT dest)
      if(NOT CMAKE_INSTALL_LIBDIR)
        include(GNUInstallDirs)
      endif()
      set(dest ${CMAKE_INSTALL_LIBDIR}/backplane/plugins)
    endif()
    # Backplane's own build sets BP_PLUGIN_INSTALL_COMPONENT=runtime so its
    # Debian package puts the plugins with the library.
    set(component)
    if(BP_PLUGIN_INSTALL_COMPONENT)
      set(component COMPONENT ${BP_PLUGIN_INSTALL_COMPONENT})
    endif()
    install(TARGETS ${target} LIBRARY DESTINATION ${dest} ${component})
  endif()
endfunction()
