# cmake -DA=a.jsonl -DB=b.jsonl -P same_losses.cmake
# Fails unless the two --metrics files log the same steps with the same
# losses, digit for digit (the JSON writer prints the shortest form that reads
# back to the same double, so equal text means equal bits).
foreach(f A B)
  file(READ "${${f}}" text)
  string(REGEX MATCHALL "\"step\":[0-9]+,\"loss\":[^,]+" ${f}_losses "${text}")
endforeach()
list(LENGTH A_losses n)
if(n EQUAL 0 OR NOT A_losses STREQUAL B_losses)
  message(FATAL_ERROR "losses differ:\n  ${A}: ${A_losses}\n  ${B}: ${B_losses}")
endif()
message(STATUS "${n} steps, same losses: ${A_losses}")
