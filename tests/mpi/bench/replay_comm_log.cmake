cmake_minimum_required(VERSION 3.25)
# A trace written by MCR_LOG=trace replayed: a short replay of a JSON trace on 2 ranks is logged,
# then the log is replayed on 2 ranks. Its op count must equal the collective instances in the log
# (one record with group_rank 0 each; send/recv left out and counted), and on 1 rank it is refused.
include(${CMAKE_CURRENT_LIST_DIR}/../../../cmake/McrMpiexec.cmake)
set(MPI ${MPIEXEC} ${MCR_MPIEXEC_FLAGS} -np 2)
file(MAKE_DIRECTORY ${OUT})
file(WRITE ${OUT}/small.json [=[
{"format": "mcr-trace", "version": 1, "ops": [
 {"op": "all_reduce", "count": 240, "async": true},
 {"op": "all_gather", "count": 24, "dtype": "i32", "async": true},
 {"op": "send", "count": 12},
 {"op": "broadcast", "count": 12, "root": 1},
 {"op": "reduce_scatter", "count": 48, "dtype": "f16"}
]}
]=])
file(REMOVE ${OUT}/log.json)  # a log of an earlier run must not pass for this one
execute_process(COMMAND ${CMAKE_COMMAND} -E env MCR_LOG=trace MCR_TRACE_FILE=${OUT}/log.json
                        ${MPI} ${MCR} replay ${OUT}/small.json --backend mpi --reps 1 --warmup 0
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT EXISTS ${OUT}/log.json)
  message(FATAL_ERROR "the logged replay failed (${rc}):\n${out}\n${err}")
endif()
file(READ ${OUT}/log.json log)
string(JSON nev LENGTH "${log}" traceEvents)
math(EXPR last "${nev} - 1")
set(instances 0)
set(p2p 0)
foreach(i RANGE ${last})
  string(JSON ph GET "${log}" traceEvents ${i} ph)
  if(NOT ph STREQUAL "X")
    continue()
  endif()
  string(JSON name GET "${log}" traceEvents ${i} name)
  if(name STREQUAL "send" OR name STREQUAL "recv")
    math(EXPR p2p "${p2p} + 1")
    continue()
  endif()
  string(JSON grank GET "${log}" traceEvents ${i} args group_rank)
  if(grank EQUAL 0)
    math(EXPR instances "${instances} + 1")
  endif()
endforeach()
if(instances LESS 5 OR p2p LESS 2)
  message(FATAL_ERROR "the log holds ${instances} collectives and ${p2p} send/recv records:\n${log}")
endif()
execute_process(COMMAND ${MPI} ${MCR} replay ${OUT}/log.json --backend mpi,auto --reps 1 --json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "replaying the log failed (${rc}):\n${out}\n${err}")
endif()
string(JSON format GET "${out}" format)
string(JSON ops GET "${out}" ops)
string(JSON skipped GET "${out}" skipped_p2p)
string(JSON total GET "${out}" policies 0 total_time_s)
string(JSON gathers GET "${out}" policies 0 per_op all_gather count)
if(NOT format STREQUAL "mcr-log" OR NOT ops EQUAL instances OR NOT skipped EQUAL p2p
   OR NOT total GREATER 0 OR gathers LESS 1)
  message(FATAL_ERROR "log replay: format ${format}, ops ${ops} (expected ${instances}), skipped "
                      "${skipped} (expected ${p2p}), total ${total}, all_gathers ${gathers}:\n${out}")
endif()
execute_process(COMMAND ${MCR} replay ${OUT}/log.json RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "log.json: the trace needs 2 ranks, but this job has 1")
  message(FATAL_ERROR "the 2-rank log on 1 rank: rc ${rc}:\n${err}")
endif()
