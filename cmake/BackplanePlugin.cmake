# bp_add_plugin(NAME SOURCES... [OUTPUT_DIR dir] [NO_INSTALL])
# Builds libbp-<NAME>.so: a MODULE that exports only its two ABI symbols,
# links nothing of Backplane and must resolve every symbol at link time.
set(BP_PLUGIN_EXPORTS_MAP ${CMAKE_CURRENT_LIST_DIR}/plugin_exports.map)

function(bp_add_plugin name)
  cmake_parse_arguments(ARG "NO_INSTALL" "OUTPUT_DIR" "SOURCES" ${ARGN})
  set(target bp-${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/include)
  set(out ${BP_PLUGIN_OUTPUT_DIR})
  if(ARG_OUTPUT_DIR)
    set(out ${ARG_OUTPUT_DIR})
  endif()
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    OUTPUT_NAME bp-${name}
    LIBRARY_OUTPUT_DIRECTORY ${out}
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(NOT BP_SANITIZE)
    target_link_options(${target} PRIVATE -Wl,--no-undefined)
  endif()
  target_link_options(${target} PRIVATE -Wl,--exclude-libs,ALL
                      -Wl,--version-script=${BP_PLUGIN_EXPORTS_MAP})
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${BP_PLUGIN_EXPORTS_MAP})
  if(NOT ARG_NO_INSTALL)
    install(TARGETS ${target} LIBRARY DESTINATION ${BP_PLUGIN_INSTALL_DIR})
  endif()
endfunction()
