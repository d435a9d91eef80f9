# reprise_trainer_tests(<trainer>
#   TINY <flags...>        a tiny model and batch, so each run takes a moment
#   RUN <flags...>         run settings of the tests' 4-step run (e.g. --dropout 0.1)
#   COMPUTE <flags...>     compute flags that the resumed half changes
#   BAD <flag:value>...    command lines that must exit with status 2, one per
#                          argument, ":" between a flag and its value
#   OTHER_RUN <flags...>   a run flag that a resume must refuse (exit 2)
#   ARCHITECTURE <flags...> a size flag that --init-from must refuse (exit 2)
#   HELP_REGEX <regex>     what --help must print
#   LOG_REGEX <regex>      what the tests' run must log
#
# The command line of a trainer built on train_cli.h: --help, bad flags, a
# tiny run that stops after 2 of 4 steps, saves and dumps gradients; its
# resume under other compute flags that exports a Hugging Face folder; the
# same 4 steps without a stop, whose losses the 2 + 2 steps must equal digit
# for digit; a resume that changes a run flag; a run initialised from the
# exported folder (bf16, sharded with an index, as the Hub holds them); a run whose second step's --trace must be Trace Event
# Format JSON (check_trace.cmake). Test names are <trainer>.<case>, label
# "examples".
function(reprise_trainer_tests trainer)
  cmake_parse_arguments(ARG "" "HELP_REGEX;LOG_REGEX"
                        "TINY;RUN;COMPUTE;BAD;OTHER_RUN;ARCHITECTURE" ${ARGN})
  set(exe $<TARGET_FILE:${trainer}>)
  # (a newline, not ";", separates the shell commands: ";" would split the list)
  set(fails_with_2 sh -c "\"$0\" \"$@\"\ntest $? -eq 2" ${exe})
  add_test(NAME ${trainer}.help COMMAND ${trainer} --help)
  set_tests_properties(${trainer}.help PROPERTIES LABELS examples
    PASS_REGULAR_EXPRESSION "${ARG_HELP_REGEX}")
  foreach(bad ${ARG_BAD})
    string(REPLACE ":" ";" args "${bad}")
    string(REPLACE ":" "_" name "${bad}")
    add_test(NAME ${trainer}.bad_flag${name} COMMAND ${fails_with_2} ${args})
    set_tests_properties(${trainer}.bad_flag${name} PROPERTIES LABELS examples)
  endforeach()

  set(dir ${CMAKE_CURRENT_BINARY_DIR}/cli_test)
  add_test(NAME ${trainer}.clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${dir})
  add_test(NAME ${trainer}.run
    COMMAND ${trainer} ${ARG_TINY} --steps 4 --stop-after 2 ${ARG_RUN} --save ${dir}/state
            --dump-grads ${dir}/grads.safetensors --metrics ${dir}/metrics.jsonl)
  add_test(NAME ${trainer}.resume
    COMMAND ${trainer} ${ARG_TINY} --steps 4 ${ARG_RUN} --resume ${dir}/state ${ARG_COMPUTE}
            --export ${dir}/hf --export-dtype bf16 --export-shard-size 20K
            --metrics ${dir}/metrics.jsonl)
  # The same 4 steps without a stop: 2 + resume + 2 must log the same losses.
  add_test(NAME ${trainer}.straight
    COMMAND ${trainer} ${ARG_TINY} --steps 4 ${ARG_RUN} --metrics ${dir}/straight.jsonl)
  add_test(NAME ${trainer}.resume_is_bitwise
    COMMAND ${CMAKE_COMMAND} -DA=${dir}/straight.jsonl -DB=${dir}/metrics.jsonl
            -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/same_losses.cmake)
  add_test(NAME ${trainer}.resume_other_run
    COMMAND ${fails_with_2} ${ARG_TINY} --steps 4 ${ARG_RUN} ${ARG_OTHER_RUN}
            --resume ${dir}/state)
  add_test(NAME ${trainer}.init_from
    COMMAND ${trainer} --init-from ${dir}/hf --batch 2 --seq 32 --steps 1 --eval-every 0
            --eval-batches 1 --threads 1)
  add_test(NAME ${trainer}.export_is_sharded
    COMMAND ${CMAKE_COMMAND} -E cat ${dir}/hf/model.safetensors.index.json)
  set_tests_properties(${trainer}.export_is_sharded PROPERTIES LABELS examples
    FIXTURES_REQUIRED ${trainer}_hf
    PASS_REGULAR_EXPRESSION "\"weight_map\": {[^}]*model-00002-of-0000[0-9].safetensors")
  add_test(NAME ${trainer}.init_from_with_size
    COMMAND ${fails_with_2} --init-from ${dir}/hf ${ARG_ARCHITECTURE})

  # --trace, checkpointed so that replays show; --trace-step alone is a
  # usage error.
  add_test(NAME ${trainer}.trace
    COMMAND ${trainer} ${ARG_TINY} --steps 3 --checkpoint-policy full --trace ${dir}/step.json)
  add_test(NAME ${trainer}.trace_is_trace_event_json
    COMMAND ${CMAKE_COMMAND} -DTRACE=${dir}/step.json
            -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/check_trace.cmake)
  add_test(NAME ${trainer}.trace_step_without_trace COMMAND ${fails_with_2} --trace-step 2)
  set_tests_properties(${trainer}.trace PROPERTIES
    FIXTURES_REQUIRED ${trainer}_clean FIXTURES_SETUP ${trainer}_trace
    PASS_REGULAR_EXPRESSION "trace +step 2: [0-9]+ spans and [0-9]+ memory samples to [^\n]*step.json")
  set_tests_properties(${trainer}.trace_is_trace_event_json PROPERTIES
    FIXTURES_REQUIRED ${trainer}_trace)
  set_tests_properties(${trainer}.trace ${trainer}.trace_is_trace_event_json
    ${trainer}.trace_step_without_trace PROPERTIES LABELS examples)

  set_tests_properties(${trainer}.clean PROPERTIES FIXTURES_SETUP ${trainer}_clean)
  set_tests_properties(${trainer}.run PROPERTIES
    FIXTURES_REQUIRED ${trainer}_clean FIXTURES_SETUP ${trainer}_state
    PASS_REGULAR_EXPRESSION "${ARG_LOG_REGEX}")
  set_tests_properties(${trainer}.resume PROPERTIES
    FIXTURES_REQUIRED ${trainer}_state FIXTURES_SETUP ${trainer}_hf
    PASS_REGULAR_EXPRESSION "resumed  from .* at step 2.*step +4/4.*verifier mismatches\nmemory   peaks of the last step: temporary [0-9.]+ MiB, parameter [0-9.]+ MiB, gradient [0-9.]+ MiB, optimizer_state [0-9.]+ MiB, saved_activation [0-9.]+ MiB, all together [0-9.]+ MiB")
  set_tests_properties(${trainer}.straight PROPERTIES
    FIXTURES_REQUIRED ${trainer}_clean FIXTURES_SETUP ${trainer}_straight)
  set_tests_properties(${trainer}.resume_is_bitwise PROPERTIES
    FIXTURES_REQUIRED "${trainer}_straight;${trainer}_hf")
  set_tests_properties(${trainer}.resume_other_run PROPERTIES FIXTURES_REQUIRED ${trainer}_state)
  set_tests_properties(${trainer}.init_from ${trainer}.init_from_with_size PROPERTIES
    FIXTURES_REQUIRED ${trainer}_hf)
  set_tests_properties(${trainer}.clean ${trainer}.run ${trainer}.resume ${trainer}.straight
    ${trainer}.resume_is_bitwise ${trainer}.resume_other_run ${trainer}.init_from
    ${trainer}.init_from_with_size PROPERTIES LABELS examples)
endfunction()
