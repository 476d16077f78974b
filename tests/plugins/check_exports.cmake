# Fails unless every plugin file in PLUGINS (a ;-list) exports exactly the two
# ABI symbols: anything more would interpose between plugins in one process.
find_program(NM nm REQUIRED)
foreach(plugin ${PLUGINS})
  execute_process(COMMAND ${NM} -D --defined-only ${plugin}
                  OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nm failed on ${plugin}")
  endif()
  string(REGEX MATCHALL "[^ \n]+\n" lines "${out}")
  set(names "")
  foreach(line ${lines})
    string(STRIP "${line}" name)
    list(APPEND names ${name})
  endforeach()
  list(SORT names)
  if(NOT names STREQUAL "bp_plugin_descriptor;bp_plugin_entry")
    message(FATAL_ERROR "${plugin} exports [${names}]; a plugin must export only "
                        "bp_plugin_descriptor and bp_plugin_entry (use bp_add_plugin)")
  endif()
  message(STATUS "${plugin}: exports only the ABI symbols")
endforeach()
