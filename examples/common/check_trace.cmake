# cmake -DTRACE=trace.json -P check_trace.cmake
# Fails unless the file a trainer's --trace wrote is valid JSON in Trace
# Event Format with forward, backward and replay spans (the run must
# checkpoint) and memory counters by kind.
file(READ "${TRACE}" text)
# string(JSON) raises an error on text that is not JSON.
string(JSON events ERROR_VARIABLE error GET "${text}" traceEvents)
if(error)
  message(FATAL_ERROR "${TRACE}: not a Trace Event Format JSON object: ${error}")
endif()
string(JSON count LENGTH "${events}")
foreach(category forward backward replay optimizer)
  if(NOT text MATCHES "\"cat\":\"${category}\",\"ph\":\"X\"")
    message(FATAL_ERROR "${TRACE}: no \"${category}\" span among its ${count} events")
  endif()
endforeach()
foreach(kind parameter gradient optimizer_state saved_activation temporary)
  if(NOT text MATCHES "\"name\":\"memory\",\"ph\":\"C\",[^}]*\"${kind}\":[0-9]+")
    message(FATAL_ERROR "${TRACE}: no memory counter of ${kind}")
  endif()
endforeach()
message(STATUS "${TRACE}: ${count} events with forward, backward, replay and optimizer spans")
