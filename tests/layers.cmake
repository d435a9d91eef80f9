# The layers in one direction (README.md, "Layout"): a file of a layer
# includes headers of its own layer and of lower layers only. The two
# backends (cpu/, cuda/) share a rank: neither includes the other.
#
#   cmake -DROOT=<repository root> -P tests/layers.cmake
#
# Fails naming every include that goes up or sideways (a CTest test, label
# "layers").
set(ranks base:0 rng:1 engine:2 cpu:3 cuda:3 io:4 autograd:5 ops:6 nn:7 parallel:8)

function(rank_of layer out)
  set(${out} "" PARENT_SCOPE)
  foreach(entry IN LISTS ranks)
    string(REPLACE ":" ";" pair "${entry}")
    list(GET pair 0 name)
    if(name STREQUAL layer)
      list(GET pair 1 r)
      set(${out} ${r} PARENT_SCOPE)
    endif()
  endforeach()
endfunction()

if(NOT ROOT)
  message(FATAL_ERROR "layers.cmake: pass -DROOT=<repository root>")
endif()
set(upward "")
set(checked 0)
foreach(entry IN LISTS ranks)
  string(REPLACE ":" ";" pair "${entry}")
  list(GET pair 0 layer)
  list(GET pair 1 rank)
  file(GLOB_RECURSE files "${ROOT}/${layer}/*.h" "${ROOT}/${layer}/*.cpp" "${ROOT}/${layer}/*.cu"
       "${ROOT}/${layer}/*.cuh" "${ROOT}/${layer}/*.def")
  foreach(file IN LISTS files)
    math(EXPR checked "${checked} + 1")
    file(STRINGS "${file}" includes REGEX "^[ \t]*#[ \t]*include[ \t]+\"[a-z_]+/")
    foreach(line IN LISTS includes)
      string(REGEX MATCH "\"([a-z_]+)/" unused "${line}")
      set(to "${CMAKE_MATCH_1}")
      rank_of("${to}" to_rank)
      if(to_rank STREQUAL "" OR to STREQUAL layer)
        continue()
      endif()
      if(NOT to_rank LESS rank)
        file(RELATIVE_PATH where "${ROOT}" "${file}")
        string(STRIP "${line}" line)
        list(APPEND upward "${where} (${layer}) includes ${to}/: ${line}")
      endif()
    endforeach()
  endforeach()
endforeach()
if(checked EQUAL 0)
  message(FATAL_ERROR "layers.cmake: no sources under ${ROOT}")
endif()
if(upward)
  list(JOIN upward "\n  " text)
  message(FATAL_ERROR "includes against the layer order (${ranks}):\n  ${text}")
endif()
message(STATUS "layers: ${checked} files include only their own layer and lower ones")
