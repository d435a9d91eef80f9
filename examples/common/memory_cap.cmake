# cmake -DTRAINER=path -DARGS="flags" -DCAP=3M -P memory_cap.cmake
# Runs the trainer under REPRISE_MAX_MEMORY=CAP: it must end with status 1,
# naming the op, its scope, the shape, the bytes and the cap, and hint at a
# budget for the budget planner; then runs it again with the hinted
# --checkpoint-policy, which must finish under the same cap.
separate_arguments(args UNIX_COMMAND "${ARGS}")
set(ENV{REPRISE_MAX_MEMORY} ${CAP})
execute_process(COMMAND ${TRAINER} ${args} RESULT_VARIABLE status OUTPUT_QUIET ERROR_VARIABLE err)
set(expected "error: out of memory on cpu: [a-z_]+ \\((forward|backward|replay)\\) at model\\.[^\n]* asked for [0-9]+ bytes \\(\\[[0-9, ]+\\] f32\\), which would pass REPRISE_MAX_MEMORY \\([0-9]+ bytes\\); live tensors: total live [0-9]+ peak [0-9]+; .*\nhint: lower --batch \\([0-9]+ now\\), or --checkpoint-policy budget:[0-9]+[KM] would fit under the cap")
if(NOT status EQUAL 1 OR NOT err MATCHES "${expected}")
  message(FATAL_ERROR "expected status 1 and the message with its hint, got ${status}:\n${err}")
endif()
string(REGEX MATCH "--checkpoint-policy budget:[0-9]+[KM]" hint "${err}")
separate_arguments(hinted UNIX_COMMAND "${hint}")
execute_process(COMMAND ${TRAINER} ${args} ${hinted} RESULT_VARIABLE status OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the hinted ${hint} did not run under ${CAP} (status ${status}):\n${out}${err}")
endif()
message(STATUS "under ${CAP}: ${hint} ran")
