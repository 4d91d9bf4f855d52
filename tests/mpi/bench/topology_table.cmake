# Tuning tables and topology on 2 ranks of one host (1x2): a table whose entries name only 4x1 is
# not applied (explain says default and why; the runtime's debug log says so when the op runs), one
# naming 1x2 is, and a table `mcr tune` writes here carries 1x2 on every entry and sample.
# -DMPIEXEC -DMCR -DOUT
include(${CMAKE_CURRENT_LIST_DIR}/../../../cmake/McrMpiexec.cmake)
set(MPI ${MPIEXEC} ${MCR_MPIEXEC_FLAGS} -np 2)
file(MAKE_DIRECTORY ${OUT})

function(write_table path hosts rph)
  file(WRITE ${path} "{\"format\": \"mcr-tuning\", \"version\": 1, \"entries\": [
    {\"op\": \"all_reduce\", \"hosts\": ${hosts}, \"ranks_per_host\": ${rph},
     \"ranges\": [{\"min_bytes\": 0, \"max_bytes\": null, \"backend\": \"mpi\"}]}]}\n")
endfunction()

# explain all_reduce 64 B under MCR_TUNING=table; sets <prefix>_source, _reason (first candidate's)
# and _topology.
function(explain table prefix)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env MCR_TUNING=${table}
                          ${MPI} ${MCR} explain all_reduce --bytes 64 --json
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "mcr explain with ${table} failed (${rc}):\n${out}\n${err}")
  endif()
  string(JSON source GET "${out}" source)
  string(JSON reason GET "${out}" candidates 0 reason)
  string(JSON topology GET "${out}" topology)
  set(${prefix}_source "${source}" PARENT_SCOPE)
  set(${prefix}_reason "${reason}" PARENT_SCOPE)
  set(${prefix}_topology "${topology}" PARENT_SCOPE)
  message(STATUS "${table}:\n${out}")
endfunction()

# Measured on 4 hosts x 1 rank: not for this job.
write_table(${OUT}/table_4x1.json 4 1)
explain(${OUT}/table_4x1.json other)
if(NOT other_topology STREQUAL "1x2")
  message(FATAL_ERROR "explain shows topology '${other_topology}', expected 1x2")
endif()
if(NOT other_source STREQUAL "default" OR NOT other_reason MATCHES
   "tuning table: measured on 4x1, this communicator is 1x2; not applied")
  message(FATAL_ERROR "a 4x1 table was applied to 1x2 or the reason is missing: source ${other_source}, reason '${other_reason}'")
endif()
# The running job says the same when the op is dispatched (MCR_DEBUG=1).
execute_process(COMMAND ${CMAKE_COMMAND} -E env MCR_TUNING=${OUT}/table_4x1.json MCR_DEBUG=1
                        ${MPI} ${MCR} bench --op all_reduce -b 64 -e 64 --backend auto -n 1 -w 0 -q
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT err MATCHES
   "select all_reduce fp32: tuning table: measured on 4x1, this communicator is 1x2; not applied")
  message(FATAL_ERROR "MCR_DEBUG=1 did not report the unused table (${rc}):\n${out}\n${err}")
endif()

# Measured on 1 host x 2 ranks: applied.
write_table(${OUT}/table_1x2.json 1 2)
explain(${OUT}/table_1x2.json same)
if(NOT same_source STREQUAL "tuning")
  message(FATAL_ERROR "a 1x2 table was not applied on 1x2: source ${same_source}, reason '${same_reason}'")
endif()

# What tune writes here names this job's topology everywhere, and is applied here.
execute_process(COMMAND ${MPI} ${MCR} tune --op all_reduce,broadcast -b 4 -e 64 -f 16 --reps 1
                        --budget-ms 1 -o ${OUT}/tuned.json -q
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mcr tune failed (${rc}):\n${out}\n${err}")
endif()
file(READ ${OUT}/tuned.json doc)
string(JSON hosts GET "${doc}" provenance hosts)
string(JSON rph GET "${doc}" provenance ranks_per_host)
if(NOT hosts STREQUAL "1" OR NOT rph STREQUAL "2")
  message(FATAL_ERROR "provenance says hosts ${hosts}, ranks_per_host ${rph}; expected 1 and 2")
endif()
foreach(list entries samples)
  string(JSON n LENGTH "${doc}" ${list})
  if(n EQUAL 0)
    message(FATAL_ERROR "tune wrote no ${list}")
  endif()
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    string(JSON h GET "${doc}" ${list} ${i} hosts)
    string(JSON r GET "${doc}" ${list} ${i} ranks_per_host)
    if(NOT h EQUAL 1 OR NOT r EQUAL 2)
      message(FATAL_ERROR "${list}[${i}] has hosts ${h}, ranks_per_host ${r}; expected 1 and 2")
    endif()
  endforeach()
endforeach()
explain(${OUT}/tuned.json tuned)
if(NOT tuned_source STREQUAL "tuning")
  message(FATAL_ERROR "the table tuned on this job was not applied: ${tuned_source}, '${tuned_reason}'")
endif()
