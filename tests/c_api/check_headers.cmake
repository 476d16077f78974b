# check_headers.cmake: every installed C header of include/backplane stands
# alone. Run by ctest (Headers.SelfContained) as
#   cmake -DINCLUDE_DIR=<repo>/include -DGENERATED_DIR=<build>/include
#         -DCC=<C compiler> -DCXX=<C++ compiler> -DWORK_DIR=<dir> -P check_headers.cmake
# 1. Each *.h (tensor.h, plugin.h, backplane.h, deprecated.h, gguf.h,
#    model.h, the generated version.h), included alone and twice, compiles as
#    strict C99 (-pedantic-errors -Wall -Wextra -Werror) and as C++17: a new
#    header is covered as soon as it is in the folder.
# 2. The plugin's headers keep to the plugin's audience: plugin.h and
#    tensor.h never bring backplane.h (the application API).
# 3. deprecated.h hides every alias under BP_NO_DEPRECATED.
cmake_minimum_required(VERSION 3.25)

set(failures "")
file(MAKE_DIRECTORY ${WORK_DIR})
file(GLOB headers RELATIVE ${INCLUDE_DIR}/backplane ${INCLUDE_DIR}/backplane/*.h)
list(APPEND headers version.h)
list(REMOVE_DUPLICATES headers)
if(NOT "tensor.h" IN_LIST headers OR NOT "deprecated.h" IN_LIST headers OR NOT "plugin.h" IN_LIST headers)
  list(APPEND failures "include/backplane lacks tensor.h, plugin.h or deprecated.h: [${headers}]")
endif()

# try_header(<name> <source text> <extra flags>...): compiles the text as C99
# and as C++17; a failure is recorded with the compiler's words.
function(try_header name text)
  string(MAKE_C_IDENTIFIER "${name}" id)
  file(WRITE ${WORK_DIR}/${id}.c "${text}")
  execute_process(COMMAND ${CC} -std=c99 -pedantic-errors -Wall -Wextra -Werror -fsyntax-only
                          -I${INCLUDE_DIR} -I${GENERATED_DIR} ${ARGN} ${WORK_DIR}/${id}.c
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    list(APPEND failures "${name} (C99):\n${out}")
  endif()
  execute_process(COMMAND ${CXX} -std=c++17 -Wall -Wextra -Werror -fsyntax-only -x c++
                          -I${INCLUDE_DIR} -I${GENERATED_DIR} ${ARGN} ${WORK_DIR}/${id}.c
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    list(APPEND failures "${name} (C++17):\n${out}")
  endif()
  set(failures ${failures} PARENT_SCOPE)
endfunction()

foreach(h ${headers})
  try_header("${h} alone" "#include \"backplane/${h}\"\n#include \"backplane/${h}\"\nint bp_header_check_;\n")
endforeach()

foreach(h plugin.h tensor.h)
  try_header("${h} keeps to the plugin's audience"
             "#include \"backplane/${h}\"\n#ifdef BACKPLANE_BACKPLANE_H_\n#error ${h} includes backplane.h\n#endif\nint bp_header_check_;\n")
endforeach()

try_header("backplane.h under BP_NO_DEPRECATED"
           "#include \"backplane/backplane.h\"\nint bp_new_tensor;\nint bp_header_check_;\n" -DBP_NO_DEPRECATED)

if(failures)
  string(REPLACE ";" "\n" text "${failures}")
  message(FATAL_ERROR "public headers:\n${text}")
endif()
message(STATUS "headers: ${headers} stand alone in C99 and C++17")
