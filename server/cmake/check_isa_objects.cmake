# ctest script (cmake -P): object files compiled with wider instructions than
# the baseline (an ISA translation unit) must define global symbols only
# inside their own namespace, run no static initializer and call nothing but
# what is listed. Anything else, such as an inline function or template of a
# shared header or a static object, would be code with those instructions
# that the linker may keep for the whole program, or that runs at start-up
# on every CPU.
#
# Variables:
#   NM         the nm program
#   OBJECTS    object files of a target (those not matching OBJECT are skipped)
#   OBJECT     regex of the checked objects' file names; its first group
#              replaces @ISA@ in NAMESPACE
#   NAMESPACE  regex every defined symbol must match, e.g.
#              "chunkd::chunking::kernels::@ISA@::" (unanchored: a
#              template instance demangles with its return type first)
#   CALLS      regex every undefined (called) symbol must match
set(checked 0)
foreach(obj IN LISTS OBJECTS)
  get_filename_component(name "${obj}" NAME)
  if(NOT name MATCHES "${OBJECT}")
    continue()
  endif()
  string(REPLACE "@ISA@" "${CMAKE_MATCH_1}" namespace "${NAMESPACE}")
  math(EXPR checked "${checked} + 1")
  execute_process(COMMAND "${NM}" -C "${obj}" OUTPUT_VARIABLE symbols
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nm failed on ${obj}")
  endif()
  string(REPLACE "\n" ";" lines "${symbols}")
  set(defined 0)
  foreach(line IN LISTS lines)
    if(line MATCHES "^[0-9a-f]* *([A-Za-z]) (.*)$")
      set(kind "${CMAKE_MATCH_1}")
      set(sym "${CMAKE_MATCH_2}")
    else()
      continue()
    endif()
    if(sym MATCHES "_GLOBAL__sub_I|__static_initialization")
      message(FATAL_ERROR "${name}: static initializer ${sym}")
    endif()
    if(kind STREQUAL "U")
      if(NOT sym MATCHES "${CALLS}")
        message(FATAL_ERROR "${name}: calls ${sym}")
      endif()
    elseif(kind MATCHES "^[TWVuBDR]$")
      if(NOT sym MATCHES "${namespace}")
        message(FATAL_ERROR "${name}: defines ${sym} outside ${namespace}")
      endif()
      math(EXPR defined "${defined} + 1")
    endif()
  endforeach()
  if(defined EQUAL 0)
    message(FATAL_ERROR "${name}: defines no symbol (is it empty?)")
  endif()
  message(STATUS "${name}: clean (${defined} global symbols)")
endforeach()
if(checked EQUAL 0)
  message(FATAL_ERROR "no object matching ${OBJECT} among: ${OBJECTS}")
endif()
