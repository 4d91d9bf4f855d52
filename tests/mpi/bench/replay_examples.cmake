cmake_minimum_required(VERSION 3.25)
# mcr replay on 3 ranks: each example trace (scaled down), a trace with a sub-group, send/recv, a
# root, repeats, steps and an async wait point, and one with a world op pending across a sub-group's
# op; the JSON is parsed and checked: every policy present with total_time_s > 0, op counts per type
# adding up to the trace's op count, no wrong values (a wrong value would fail the run).
include(${CMAKE_CURRENT_LIST_DIR}/../../../cmake/McrMpiexec.cmake)
set(MPI ${MPIEXEC} ${MCR_MPIEXEC_FLAGS} -np 3)
file(MAKE_DIRECTORY ${OUT})
file(WRITE ${OUT}/mixed.json [=[
{"format": "mcr-trace", "version": 1, "steps": 2, "ops": [
 {"op": "all_reduce", "count": 1200, "dtype": "f32", "async": true},
 {"op": "all_gather", "bytes": 2400, "dtype": "f16", "async": true, "wait": true},
 {"op": "broadcast", "count": 36, "dtype": "i32", "root": 1, "group": [2, 0]},
 {"op": "send", "count": 12, "dtype": "f64", "group": [0, 1]},
 {"op": "reduce_scatter", "count": 120, "dtype": "bf16", "repeat": 3},
 {"op": "all_to_all", "count": 48, "dtype": "u8", "async": true},
 {"op": "barrier"}
]}
]=])
# A world op pending across a sub-group's sync op: the sync op ends the run on its members only, so
# the second all_reduce is a new position on rank 2 and the first one's on ranks 0 and 1; its data
# must still be the same on every rank (it was not: wrong values, blamed on the policy).
file(WRITE ${OUT}/split.json [=[
{"format": "mcr-trace", "version": 1, "ops": [
 {"op": "all_reduce", "count": 12, "async": true},
 {"op": "broadcast", "count": 12, "group": [0, 1]},
 {"op": "all_reduce", "count": 12, "async": true, "wait": true}
]}
]=])
# name, scale, expected op count per pass
set(cases "dp_step_100m.json|0.002|18" "zero3_step.json|0.01|157" "moe_step.json|0.01|27"
          "${OUT}/mixed.json|1|18" "${OUT}/split.json|1|3")
foreach(case ${cases})
  string(REPLACE "|" ";" case "${case}")
  list(GET case 0 trace)
  list(GET case 1 scale)
  list(GET case 2 expected_ops)
  if(NOT IS_ABSOLUTE "${trace}")
    set(trace "${TRACES}/${trace}")
  endif()
  execute_process(COMMAND ${MPI} ${MCR} replay ${trace} --backend mpi,gloo,auto --scale ${scale}
                          --reps 2 --json
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "mcr replay ${trace} failed (${rc}):\n${out}\n${err}")
  endif()
  string(JSON ranks GET "${out}" ranks)
  string(JSON ops GET "${out}" ops)
  if(NOT ranks EQUAL 3 OR NOT ops EQUAL expected_ops)
    message(FATAL_ERROR "${trace}: ranks ${ranks} (expected 3), ops ${ops} (expected ${expected_ops}):\n${out}")
  endif()
  string(JSON np LENGTH "${out}" policies)
  if(NOT np EQUAL 3)
    message(FATAL_ERROR "${trace}: ${np} policies, expected mpi, gloo, auto:\n${out}")
  endif()
  set(seen "")
  math(EXPR last "${np} - 1")
  foreach(p RANGE ${last})
    string(JSON name GET "${out}" policies ${p} backend)
    string(JSON total GET "${out}" policies ${p} total_time_s)
    string(JSON nreps LENGTH "${out}" policies ${p} reps)
    list(APPEND seen ${name})
    if(NOT total GREATER 0 OR NOT nreps EQUAL 2)
      message(FATAL_ERROR "${trace}: policy ${name}: total_time_s ${total}, ${nreps} reps:\n${out}")
    endif()
    string(JSON ntypes LENGTH "${out}" policies ${p} per_op)
    math(EXPR tlast "${ntypes} - 1")
    set(sum 0)
    foreach(t RANGE ${tlast})
      string(JSON type MEMBER "${out}" policies ${p} per_op ${t})
      string(JSON count GET "${out}" policies ${p} per_op ${type} count)
      math(EXPR sum "${sum} + ${count}")
    endforeach()
    if(NOT sum EQUAL expected_ops)
      message(FATAL_ERROR "${trace}: policy ${name}: per-op counts add up to ${sum}, expected ${expected_ops}")
    endif()
  endforeach()
  if(NOT "${seen}" STREQUAL "mpi;gloo;auto")
    message(FATAL_ERROR "${trace}: policies ${seen}, expected mpi;gloo;auto")
  endif()
  string(JSON auto_vs_best GET "${out}" auto_vs_best)
  if(NOT auto_vs_best GREATER 0)
    message(FATAL_ERROR "${trace}: auto_vs_best ${auto_vs_best}")
  endif()
endforeach()
