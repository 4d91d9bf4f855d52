# mcr tune on 2 ranks (short sweep) -> mcr tune --validate -> mcr explain under MCR_TUNING.
include(${CMAKE_CURRENT_LIST_DIR}/../../../cmake/McrMpiexec.cmake)
set(MPI ${MPIEXEC} ${MCR_MPIEXEC_FLAGS} -np 2)
file(MAKE_DIRECTORY ${OUT})
execute_process(COMMAND ${MPI} ${MCR} tune --op all_reduce,broadcast,send,barrier -b 4 -e 16K -f 16 --reps 3
                        -o ${OUT}/table.json -q
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mcr tune failed (${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND ${MCR} tune --validate ${OUT}/table.json RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "valid tuning table")
  message(FATAL_ERROR "--validate rejected the table tune wrote (${rc}):\n${out}")
endif()
file(READ ${OUT}/table.json table)
foreach(key "\"provenance\"" "\"hosts\"" "\"ranks_per_host\"" "\"cpu\"" "\"libraries\"" "\"samples\"" "\"recv\"")
  string(FIND "${table}" "${key}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "table.json lacks ${key}")
  endif()
endforeach()
# A broken table is reported with every problem and a non-zero exit.
file(WRITE ${OUT}/bad.json "{\"format\":\"mcr-tuning\",\"version\":1,\"entries\":[{\"op\":\"allreduse\",\"ranges\":[{\"min_bytes\":0,\"max_bytes\":null,\"backend\":\"ucx\"}]}]}")
execute_process(COMMAND ${MCR} tune --validate ${OUT}/bad.json RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(rc EQUAL 0 OR NOT out MATCHES "unknown op 'allreduse'" OR NOT out MATCHES "unknown backend 'ucx'")
  message(FATAL_ERROR "--validate did not report the broken table (${rc}):\n${out}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env MCR_TUNING=${OUT}/table.json
                        ${MPI} ${MCR} explain all_reduce --bytes 64 --json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\"source\": \"tuning\"" OR NOT out MATCHES "\"candidates\"")
  message(FATAL_ERROR "mcr explain did not report the table's choice (${rc}):\n${out}\n${err}")
endif()
message(STATUS "tune, validate and explain agree:\n${out}")

# mcr bench --compare-auto with that table: every row holds auto's choice (the one explain gives),
# each variant's time, the best single backend (the fastest of them), and a ratio inside its own
# confidence interval, from at least --reps rounds.
execute_process(COMMAND ${CMAKE_COMMAND} -E env MCR_TUNING=${OUT}/table.json
                        ${MPI} ${MCR} bench --compare-auto --op all_reduce,broadcast --sizes 64,16K
                        --reps 5 --extra-budget 0.2 --json ${OUT}/compare.json -q
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "of 4 points have auto >= 0.95")
  message(FATAL_ERROR "mcr bench --compare-auto failed (${rc}):\n${out}\n${err}")
endif()
file(READ ${OUT}/compare.json doc)
string(JSON rows GET "${doc}" rows)
string(JSON n LENGTH "${rows}")
if(NOT n EQUAL 4)
  message(FATAL_ERROR "--compare-auto: ${n} rows instead of 4:\n${doc}")
endif()
math(EXPR last "${n} - 1")
foreach(i RANGE ${last})
  string(JSON op GET "${rows}" ${i} op)
  string(JSON bytes GET "${rows}" ${i} bytes)
  string(JSON chosen GET "${rows}" ${i} auto_backend)
  string(JSON best GET "${rows}" ${i} best_backend)
  string(JSON best_us GET "${rows}" ${i} best_us)
  string(JSON ratio GET "${rows}" ${i} ratio)
  string(JSON low GET "${rows}" ${i} ratio_ci95 0)
  string(JSON high GET "${rows}" ${i} ratio_ci95 1)
  string(JSON pairs GET "${rows}" ${i} pairs)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env MCR_TUNING=${OUT}/table.json
                          ${MPI} ${MCR} explain ${op} --bytes ${bytes} --json
                  OUTPUT_VARIABLE explained)
  string(JSON explained_backend GET "${explained}" backend)
  if(NOT chosen STREQUAL explained_backend)
    message(FATAL_ERROR "${op} ${bytes}: compare-auto says auto picks ${chosen}, explain says ${explained_backend}")
  endif()
  # The best single backend is the fastest of the per-backend columns.
  foreach(b mpi gloo)
    string(JSON t ERROR_VARIABLE missing GET "${rows}" ${i} ${b}_us)
    if(NOT missing AND NOT t STREQUAL "null" AND t LESS best_us)
      message(FATAL_ERROR "${op} ${bytes}: ${b} (${t} us) is faster than the reported best ${best} (${best_us} us)")
    endif()
  endforeach()
  if(pairs LESS 5 OR low GREATER ratio OR ratio GREATER high OR NOT ratio GREATER 0)
    message(FATAL_ERROR "${op} ${bytes}: ratio ${ratio} outside [${low}, ${high}] or ${pairs} pairs < 5")
  endif()
endforeach()
# Bad options are named before anything runs.
execute_process(COMMAND ${MPI} ${MCR} bench --compare-auto --precision -0.5 -q
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "--precision -0.5: must be >= 0")
  message(FATAL_ERROR "--precision -0.5 was not rejected (${rc}):\n${out}\n${err}")
endif()
message(STATUS "compare-auto rows agree with explain:\n${doc}")
