# reprise_parallel_tests(<trainer>
#   TINY <flags...>       a tiny model and batch (--batch b), so each run takes a moment
#   RUN <flags...>        run settings of every run (dropout on)
#   PARALLEL <flags...>   compute flags of every run on 2 processes
#   FIELDS <a,b,...>      the --metrics fields that must agree with accumulation's
#                         (resumed and bigger-batch runs compare loss and grad_norm:
#                         their evaluations differ)
#   POLICIES <P>...       checkpoint policies whose 2-process runs must be bitwise the run's
#                         without checkpointing (under the bitwise verifier); "P+--flag=v"
#                         adds compute flags to that run (full+--router=recompute)
#   BIG_BATCH <max_abs> <max_rel>  tolerances of the 1 process x 2b comparison (optional)
#
# Training on 2 processes (mpiexec), against one: tests <trainer>.mpi.<case>,
# label mpi, each run 4 steps:
#   two_ranks           2 processes x batch b, saved, replicas checked every step
#   accumulate          1 process x --grad-accum 2 x batch b; must_equal_two_ranks
#                       compares the checkpoints' tensors and the metrics bit for bit
#   big_batch           1 process x batch 2b; near_two_ranks within BIG_BATCH
#   policy_<P>          2 processes under policy P; policy_<P>_is_bitwise
#   shard_<mode>_<policy>       2 processes with --shard optimizer (ZeRO-1), gradients
#                               (ZeRO-2) and parameters (ZeRO-3), each under the checkpoint
#                               policies none, full and op-sac (verified bitwise):
#                               _is_bitwise compares each with two_ranks (checkpoints and
#                               metrics)
#   four_ranks_<mode>_<policy>  the same on 4 processes x batch 1: _is_bitwise compares each
#                               with accumulate_four (1 process x --grad-accum 4 x batch 1)
#   shard_resume                resumes `stop` with the gradients split; shard_stop_resume
#                               resumes a stop with the parameters split, split alike, and
#                               shard_stop_resume_unsplit the same stop unsplit (each
#                               process's moments read out of the per-process files)
#   stop, resume        2 processes: 2 steps saved, then resumed for 2; resume_is_bitwise
#   resume_other_ranks  1 process resuming that checkpoint: exit 2, names both numbers
#   rank_exits          rank 1 stops after one step (as if interrupted); rank 0 fails
#                       within its 3 s timeout with an error naming rank 1; _split the
#                       same with --shard parameters
function(reprise_parallel_tests trainer)
  cmake_parse_arguments(ARG "" "FIELDS" "TINY;RUN;PARALLEL;POLICIES;BIG_BATCH" ${ARGN})
  set(exe $<TARGET_FILE:${trainer}>)
  set(compare $<TARGET_FILE:compare_runs>)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/mpi_test)
  set(run ${ARG_TINY} --steps 4 ${ARG_RUN})
  set(t ${trainer}.mpi)
  set(tests)
  macro(reprise_mpi_test name)
    add_test(NAME ${t}.${name} ${ARGN})
    list(APPEND tests ${t}.${name})
  endmacro()

  reprise_mpi_test(clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${dir})
  set_tests_properties(${t}.clean PROPERTIES FIXTURES_SETUP ${t}_clean)
  reprise_mpi_test(two_ranks COMMAND ${REPRISE_MPIEXEC_2} ${exe} ${run} ${ARG_PARALLEL}
    --check-replicas 1 --save ${dir}/two_ranks --metrics ${dir}/two_ranks.jsonl)
  set_tests_properties(${t}.two_ranks PROPERTIES
    FIXTURES_REQUIRED ${t}_clean FIXTURES_SETUP ${t}_two_ranks)

  reprise_mpi_test(accumulate COMMAND ${exe} ${run} --grad-accum 2
    --save ${dir}/accumulate --metrics ${dir}/accumulate.jsonl)
  reprise_mpi_test(accumulate_equals_two_ranks COMMAND sh -c
    "\"$0\" states \"$1/two_ranks\" \"$1/accumulate\" && \"$0\" metrics \"$1/two_ranks.jsonl\" \"$1/accumulate.jsonl\" \"$2\""
    ${compare} ${dir} ${ARG_FIELDS})
  set_tests_properties(${t}.accumulate PROPERTIES
    FIXTURES_REQUIRED ${t}_clean FIXTURES_SETUP ${t}_accumulate)
  set_tests_properties(${t}.accumulate_equals_two_ranks PROPERTIES
    FIXTURES_REQUIRED "${t}_two_ranks;${t}_accumulate")

  if(ARG_BIG_BATCH)
    list(GET ARG_BIG_BATCH 0 max_abs)
    list(GET ARG_BIG_BATCH 1 max_rel)
    reprise_mpi_test(big_batch COMMAND ${exe} ${run} --batch 4
      --save ${dir}/big_batch --metrics ${dir}/big_batch.jsonl)
    reprise_mpi_test(big_batch_near_two_ranks COMMAND sh -c
      "\"$0\" states \"$1/two_ranks\" \"$1/big_batch\" $2 && \"$0\" metrics \"$1/two_ranks.jsonl\" \"$1/big_batch.jsonl\" loss,grad_norm $3"
      ${compare} ${dir} ${max_abs} ${max_rel})
    set_tests_properties(${t}.big_batch PROPERTIES
      FIXTURES_REQUIRED ${t}_clean FIXTURES_SETUP ${t}_big_batch)
    set_tests_properties(${t}.big_batch_near_two_ranks PROPERTIES
      FIXTURES_REQUIRED "${t}_two_ranks;${t}_big_batch")
  endif()

  foreach(spec ${ARG_POLICIES})
    string(REPLACE "+" ";" flags ${spec})
    list(POP_FRONT flags policy)
    string(REGEX REPLACE "[^a-z0-9]+" "_" p ${spec})
    reprise_mpi_test(policy_${p} COMMAND ${REPRISE_MPIEXEC_2} ${exe} ${run} ${ARG_PARALLEL}
      --checkpoint-policy ${policy} --verify bitwise ${flags} --save ${dir}/policy_${p})
    reprise_mpi_test(policy_${p}_is_bitwise COMMAND ${compare} states ${dir}/two_ranks
      ${dir}/policy_${p})
    set_tests_properties(${t}.policy_${p} PROPERTIES
      FIXTURES_REQUIRED ${t}_clean FIXTURES_SETUP ${t}_policy_${p}
      PASS_REGULAR_EXPRESSION " 0 verifier mismatches")
    set_tests_properties(${t}.policy_${p}_is_bitwise PROPERTIES
      FIXTURES_REQUIRED "${t}_two_ranks;${t}_policy_${p}")
  endforeach()

  reprise_mpi_test(accumulate_four COMMAND ${exe} ${run} --batch 1 --grad-accum 4
    --save ${dir}/accumulate_four --metrics ${dir}/accumulate_four.jsonl)
  set_tests_properties(${t}.accumulate_four PROPERTIES
    FIXTURES_REQUIRED ${t}_clean FIXTURES_SETUP ${t}_accumulate_four)
  foreach(mode optimizer gradients parameters)
    foreach(policy none full op-sac)
      string(REPLACE "-" "_" p ${policy})
      set(two shard_${mode}_${p})
      set(four four_ranks_${mode}_${p})
      set(check " 0 verifier mismatches")
      if(policy STREQUAL "none")
        set(check "optimizer state split over the processes")
      endif()
      reprise_mpi_test(${two} COMMAND ${REPRISE_MPIEXEC_2} ${exe} ${run} ${ARG_PARALLEL}
        --shard ${mode} --checkpoint-policy ${policy} --verify bitwise --check-replicas 1
        --save ${dir}/${two} --metrics ${dir}/${two}.jsonl)
      reprise_mpi_test(${four} COMMAND ${REPRISE_MPIEXEC_4} ${exe} ${run} ${ARG_PARALLEL}
        --batch 1 --shard ${mode} --checkpoint-policy ${policy} --verify bitwise
        --save ${dir}/${four} --metrics ${dir}/${four}.jsonl)
      foreach(pair "${two};two_ranks" "${four};accumulate_four")
        list(GET pair 0 name)
        list(GET pair 1 reference)
        reprise_mpi_test(${name}_is_bitwise COMMAND sh -c
          "\"$0\" states \"$1/$3\" \"$1/$4\" && \"$0\" metrics \"$1/$3.jsonl\" \"$1/$4.jsonl\" \"$2\""
          ${compare} ${dir} ${ARG_FIELDS} ${reference} ${name})
        set_tests_properties(${t}.${name} PROPERTIES
          FIXTURES_REQUIRED ${t}_clean FIXTURES_SETUP ${t}_${name}
          PASS_REGULAR_EXPRESSION "${check}")
        set_tests_properties(${t}.${name}_is_bitwise PROPERTIES
          FIXTURES_REQUIRED "${t}_${reference};${t}_${name}")
      endforeach()
    endforeach()
  endforeach()

  reprise_mpi_test(stop COMMAND ${REPRISE_MPIEXEC_2} ${exe} ${run} ${ARG_PARALLEL} --stop-after 2
    --save ${dir}/stopped --metrics ${dir}/resumed.jsonl)
  reprise_mpi_test(resume COMMAND ${REPRISE_MPIEXEC_2} ${exe} ${run} ${ARG_PARALLEL}
    --resume ${dir}/stopped --save ${dir}/resumed --metrics ${dir}/resumed.jsonl)
  reprise_mpi_test(resume_is_bitwise COMMAND sh -c
    "\"$0\" states \"$1/two_ranks\" \"$1/resumed\" && \"$0\" metrics \"$1/two_ranks.jsonl\" \"$1/resumed.jsonl\" loss,grad_norm"
    ${compare} ${dir})
  # A checkpoint written unsharded resumes sharded, and one written with the
  # parameters split resumes so: the file holds the whole state either way.
  reprise_mpi_test(shard_resume COMMAND ${REPRISE_MPIEXEC_2} ${exe} ${run} ${ARG_PARALLEL}
    --shard gradients --resume ${dir}/stopped --save ${dir}/shard_resumed)
  reprise_mpi_test(shard_resume_is_bitwise COMMAND ${compare} states ${dir}/two_ranks
    ${dir}/shard_resumed)
  set_tests_properties(${t}.shard_resume PROPERTIES FIXTURES_REQUIRED ${t}_stop
    FIXTURES_SETUP ${t}_shard_resume)
  set_tests_properties(${t}.shard_resume_is_bitwise PROPERTIES
    FIXTURES_REQUIRED "${t}_two_ranks;${t}_shard_resume")
  reprise_mpi_test(shard_stop COMMAND ${REPRISE_MPIEXEC_2} ${exe} ${run} ${ARG_PARALLEL}
    --shard parameters --stop-after 2 --save ${dir}/shard_stopped)
  reprise_mpi_test(shard_stop_resume COMMAND ${REPRISE_MPIEXEC_2} ${exe} ${run} ${ARG_PARALLEL}
    --shard parameters --resume ${dir}/shard_stopped --save ${dir}/shard_stop_resumed)
  reprise_mpi_test(shard_stop_resume_is_bitwise COMMAND ${compare} states ${dir}/two_ranks
    ${dir}/shard_stop_resumed)
  set_tests_properties(${t}.shard_stop PROPERTIES FIXTURES_REQUIRED ${t}_clean
    FIXTURES_SETUP ${t}_shard_stop)
  set_tests_properties(${t}.shard_stop_resume PROPERTIES FIXTURES_REQUIRED ${t}_shard_stop
    FIXTURES_SETUP ${t}_shard_stop_resume)
  set_tests_properties(${t}.shard_stop_resume_is_bitwise PROPERTIES
    FIXTURES_REQUIRED "${t}_two_ranks;${t}_shard_stop_resume")
  reprise_mpi_test(shard_stop_resume_unsplit COMMAND ${REPRISE_MPIEXEC_2} ${exe} ${run}
    ${ARG_PARALLEL} --resume ${dir}/shard_stopped --save ${dir}/shard_stop_resumed_unsplit)
  reprise_mpi_test(shard_stop_resume_unsplit_is_bitwise COMMAND ${compare} states
    ${dir}/two_ranks ${dir}/shard_stop_resumed_unsplit)
  set_tests_properties(${t}.shard_stop_resume_unsplit PROPERTIES
    FIXTURES_REQUIRED ${t}_shard_stop FIXTURES_SETUP ${t}_shard_stop_resume_unsplit)
  set_tests_properties(${t}.shard_stop_resume_unsplit_is_bitwise PROPERTIES
    FIXTURES_REQUIRED "${t}_two_ranks;${t}_shard_stop_resume_unsplit")
  reprise_mpi_test(resume_other_ranks COMMAND sh -c
    "out=$(\"$0\" \"$@\" 2>&1)\nstatus=$?\necho \"$out\"\ntest $status -eq 2 && echo \"$out\" | grep -q 'written by a run of 2 process(es), and this run has 1'"
    ${exe} ${run} --resume ${dir}/stopped)
  set_tests_properties(${t}.stop PROPERTIES FIXTURES_REQUIRED ${t}_clean FIXTURES_SETUP ${t}_stop)
  set_tests_properties(${t}.resume PROPERTIES FIXTURES_REQUIRED ${t}_stop
    FIXTURES_SETUP ${t}_resume PASS_REGULAR_EXPRESSION "resumed  from .* at step 2.*step +4/4")
  set_tests_properties(${t}.resume_is_bitwise PROPERTIES
    FIXTURES_REQUIRED "${t}_two_ranks;${t}_resume")
  set_tests_properties(${t}.resume_other_ranks PROPERTIES FIXTURES_REQUIRED ${t}_stop)

  # Rank 1 leaves after one step, as an interrupted process would. The data
  # file is too short for held-out windows, so its last step evaluates
  # nothing and it ends without another collective.
  reprise_mpi_test(short_data COMMAND sh -c "mkdir -p \"$1\" && head -c 300 \"$0\" > \"$1/short.txt\""
    ${PROJECT_SOURCE_DIR}/README.md ${dir})
  reprise_mpi_test(rank_exits COMMAND ${REPRISE_MPIEXEC}
    ${MPIEXEC_NUMPROC_FLAG} 1 ${exe} ${run} ${ARG_PARALLEL} --data ${dir}/short.txt
    --comm-timeout 3 :
    ${MPIEXEC_NUMPROC_FLAG} 1 ${exe} ${run} ${ARG_PARALLEL} --data ${dir}/short.txt
    --comm-timeout 3 --stop-after 1)
  # The same with the parameters split: rank 0's next gather (on the
  # prefetch thread) times out, and the error reaches its main thread.
  reprise_mpi_test(rank_exits_split COMMAND ${REPRISE_MPIEXEC}
    ${MPIEXEC_NUMPROC_FLAG} 1 ${exe} ${run} ${ARG_PARALLEL} --data ${dir}/short.txt
    --comm-timeout 3 --shard parameters :
    ${MPIEXEC_NUMPROC_FLAG} 1 ${exe} ${run} ${ARG_PARALLEL} --data ${dir}/short.txt
    --comm-timeout 3 --shard parameters --stop-after 1)
  set_tests_properties(${t}.short_data PROPERTIES
    FIXTURES_REQUIRED ${t}_clean FIXTURES_SETUP ${t}_short_data)
  set_tests_properties(${t}.rank_exits ${t}.rank_exits_split PROPERTIES
    FIXTURES_REQUIRED ${t}_short_data TIMEOUT 60
    PASS_REGULAR_EXPRESSION
    "rank 0 of 2\\): error: [a-z_]+ \\([^)]*\\) on rank 0 of 2 \\(MPI\\): timed out after 3 s: no data from rank 1")

  set_tests_properties(${tests} PROPERTIES LABELS mpi ENVIRONMENT "${REPRISE_MPIEXEC_ENV}")
endfunction()
