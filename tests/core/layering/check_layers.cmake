# check_layers.cmake: proves the direction abi/ <- core/ <- registry/
# (core/CMakeLists.txt). Run by ctest (Layers.*) as
#   cmake -DSOURCE_DIR=<repo> -DCXX=<compiler> "-DCORE_INCLUDES=<dir>|<dir>..."
#         "-DABI_INCLUDES=<dir>|..." -DWORK_DIR=<dir> -P check_layers.cmake
# 1. No source of abi/ includes core/ or registry/, no source of core/
#    includes registry/ (any spelling: "registry/x", "../registry/x").
# 2. With core's own include path, a file including core/ and abi/ headers
#    compiles, and one including a registry/ header does not, the compiler
#    saying it cannot find that header; with abi's, a file including a core/
#    header does not.
cmake_minimum_required(VERSION 3.25)

set(failures "")

function(scan layer forbidden)
  file(GLOB_RECURSE files ${SOURCE_DIR}/${layer}/*.cpp ${SOURCE_DIR}/${layer}/*.hpp ${SOURCE_DIR}/${layer}/*.h
       ${SOURCE_DIR}/${layer}/*.c)
  foreach(f ${files})
    file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include")
    foreach(line ${lines})
      foreach(up ${forbidden})
        if(line MATCHES "[\"</]${up}/")
          file(RELATIVE_PATH rel ${SOURCE_DIR} ${f})
          list(APPEND failures "${rel} includes a ${up}/ header: ${line}")
        endif()
      endforeach()
    endforeach()
  endforeach()
  set(failures ${failures} PARENT_SCOPE)
endfunction()

scan(abi "core;registry")
scan(core "registry")

# try_layer(<name> <include dirs, |-separated> <source> PASS)
# try_layer(<name> <include dirs, |-separated> <source> FAIL <header that must be missing>)
function(try_layer name includes source expect)
  string(REPLACE "|" ";" dirs "${includes}")
  set(flags "")
  foreach(d ${dirs})
    list(APPEND flags "-I${d}")
  endforeach()
  execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only ${flags} ${source}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(expect STREQUAL "PASS" AND NOT rc EQUAL 0)
    list(APPEND failures "${name}: should compile and did not:\n${out}")
  elseif(expect STREQUAL "FAIL")
    if(rc EQUAL 0)
      list(APPEND failures "${name}: a back-edge compiled; the layer's include path reaches a higher layer")
    elseif(NOT out MATCHES "(No such file|file not found)" OR NOT out MATCHES "${ARGV4}")
      list(APPEND failures "${name}: failed, but not for the missing header:\n${out}")
    endif()
  endif()
  set(failures ${failures} PARENT_SCOPE)
endfunction()

set(here ${CMAKE_CURRENT_LIST_DIR})
try_layer("core sees core/ and abi/" "${CORE_INCLUDES}" ${here}/core_includes_own.cpp PASS)
try_layer("core cannot see registry/" "${CORE_INCLUDES}" ${here}/core_includes_registry.cpp FAIL
          "registry/registry_internal.hpp")
try_layer("abi sees abi/" "${ABI_INCLUDES}" ${here}/abi_includes_own.cpp PASS)
try_layer("abi cannot see core/" "${ABI_INCLUDES}" ${here}/abi_includes_core.cpp FAIL "core/errors.hpp")

if(failures)
  string(REPLACE ";" "\n" text "${failures}")
  message(FATAL_ERROR "layering broken:\n${text}")
endif()
message(STATUS "layers: abi/ <- core/ <- registry/ holds")
