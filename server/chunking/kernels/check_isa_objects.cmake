# ctest script (cmake -P): the object files of the ISA translation units
# (avx2.cc.o, avx512.cc.o) must define symbols only inside their own
# namespace, run no static initializers and call nothing but memcpy, memset
# and the scalar kernels (baseline code).
# Anything else — an inline function or template from a shared header, a
# static object — would be code compiled with wider instructions that the
# linker may keep for the whole program or that runs at start-up on every
# CPU (backends.h). Variables: NM, OBJECTS (list of object files).
foreach(obj IN LISTS OBJECTS)
  get_filename_component(name "${obj}" NAME)
  if(name MATCHES "^(avx2|avx512)\\.cc\\.o(bj)?$")
    set(isa "${CMAKE_MATCH_1}")
  else()
    continue()
  endif()
  execute_process(COMMAND "${NM}" -C "${obj}" OUTPUT_VARIABLE symbols
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nm failed on ${obj}")
  endif()
  string(REPLACE "\n" ";" lines "${symbols}")
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
      if(NOT sym MATCHES "^(memcpy|memset|chunkd::chunking::kernels::scalar::.*)$")
        message(FATAL_ERROR "${name}: calls ${sym}")
      endif()
    elseif(kind MATCHES "^[TWVuBDR]$")
      if(NOT sym MATCHES "chunkd::chunking::kernels::${isa}::")
        message(FATAL_ERROR "${name}: defines ${sym} outside namespace ${isa}")
      endif()
    endif()
  endforeach()
  message(STATUS "${name}: clean")
endforeach()
