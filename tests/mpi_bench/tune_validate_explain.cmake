# mcr tune on 2 ranks (short sweep) -> mcr tune --validate -> mcr explain under MCR_TUNING.
set(MPI ${MPIEXEC} --oversubscribe --bind-to none --allow-run-as-root --mca mpi_yield_when_idle 1 -np 2)
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
