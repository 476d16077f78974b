# check_plugin_includes.cmake: a plugin is built from the plugin's headers
# (backplane/plugin.h, backplane/tensor.h, backplane/plugin_guard.hpp) and
# plugins/common, never from the application API or a core header. Run by
# ctest (Plugins.IncludeOnlyThePluginHeaders) as
#   cmake -DSOURCE_DIR=<repo> -DCXX=<compiler> "-DPLUGIN_INCLUDES=<dir>|<dir>..."
#         -DWORK_DIR=<dir> -P check_plugin_includes.cmake
# 1. No source of plugins/, examples/plugin-c/ or the plugin fixtures of
#    tests/fixtures includes backplane.h, backplane.hpp, deprecated.h,
#    gguf.h, model.h or a header by its path from the source root (core/,
#    registry/, abi/, gguf/, plugins/, shaders/ ...).
# 2. With a plugin's include path (PLUGIN_INCLUDES, bp-cpu's), a file
#    including plugin.h and plugins/common headers compiles, and one
#    including a core header does not, the compiler not finding it.
cmake_minimum_required(VERSION 3.25)

set(failures "")
file(GLOB_RECURSE files
     ${SOURCE_DIR}/plugins/*.cpp ${SOURCE_DIR}/plugins/*.hpp ${SOURCE_DIR}/plugins/*.h ${SOURCE_DIR}/plugins/*.c
     ${SOURCE_DIR}/examples/plugin-c/*.c ${SOURCE_DIR}/examples/plugin-c/*.h
     ${SOURCE_DIR}/tests/fixtures/*.cpp ${SOURCE_DIR}/tests/fixtures/*.hpp ${SOURCE_DIR}/tests/fixtures/*.c)
# Applications among the fixtures: they drive the registry through the C API.
list(FILTER files EXCLUDE REGEX "/tests/fixtures/registry_probe\\.c$")
foreach(f ${files})
  file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include")
  foreach(line ${lines})
    if(line MATCHES "backplane/(backplane\\.h|backplane\\.hpp|deprecated\\.h|gguf\\.h|model\\.h)"
       OR line MATCHES "[\"<](core|registry|abi|gguf|plugins|shaders|tools|models|remote|python)/")
      file(RELATIVE_PATH rel ${SOURCE_DIR} ${f})
      list(APPEND failures "${rel}: ${line}")
    endif()
  endforeach()
endforeach()

string(REPLACE "|" ";" dirs "${PLUGIN_INCLUDES}")
set(flags "")
foreach(d ${dirs})
  list(APPEND flags "-I${d}")
endforeach()
file(MAKE_DIRECTORY ${WORK_DIR})
file(WRITE ${WORK_DIR}/plugin_own.cpp
     "#include \"backplane/plugin.h\"\n#include \"backplane/plugin_guard.hpp\"\n#include \"plugin_common.hpp\"\n")
file(WRITE ${WORK_DIR}/plugin_core.cpp "#include \"backplane/plugin.h\"\n#include \"core/objects.hpp\"\n")
execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only ${flags} ${WORK_DIR}/plugin_own.cpp
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  list(APPEND failures "the plugin's headers do not compile with a plugin's include path:\n${out}")
endif()
execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only ${flags} ${WORK_DIR}/plugin_core.cpp
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  list(APPEND failures "a plugin's include path reaches core/ (core/objects.hpp compiled)")
elseif(NOT out MATCHES "(No such file|file not found)" OR NOT out MATCHES "core/objects.hpp")
  list(APPEND failures "core/objects.hpp failed, but not for the missing header:\n${out}")
endif()

if(failures)
  string(REPLACE ";" "\n" text "${failures}")
  message(FATAL_ERROR "plugin includes:\n${text}")
endif()
message(STATUS "plugins include only include/ and plugins/common (${dirs})")
