cmake_minimum_required(VERSION 3.25)
# mcr tune --refine, end to end without ranks: a 2 x 2 table tuned with MPI faster everywhere, and
# two MCR_LOG traces of a program (one run on MPI, one on Gloo with its host map) in which Gloo's
# 327,680-byte all_to_all is the faster one. The refined table must put that size on Gloo, keep
# the run's medians as samples marked "run", validate, and the CLI must refuse a missing trace, an
# output that would overwrite its input (by another name too) and a hysteresis outside [0, 1).
file(MAKE_DIRECTORY ${OUT})
set(table ${OUT}/table.json)
set(samples "")
foreach(size_us IN ITEMS "262144;500;600" "1048576;2000;2400")
  list(GET size_us 0 bytes)
  list(GET size_us 1 mpi)
  list(GET size_us 2 gloo)
  foreach(pair IN ITEMS "mpi;${mpi}" "gloo;${gloo}")
    list(GET pair 0 backend)
    list(GET pair 1 us)
    string(APPEND samples "${sep}{\"op\": \"all_to_all\", \"dtype_class\": \"any\", \"group_size\": 4, "
           "\"hosts\": 2, \"ranks_per_host\": 2, \"form\": \"async\", \"in_flight\": 1, "
           "\"bytes\": ${bytes}, \"backend\": \"${backend}\", \"time_us\": ${us}}")
    set(sep ", ")
  endforeach()
endforeach()
file(WRITE ${table} "{\"format\": \"mcr-tuning\", \"version\": 1,
  \"provenance\": {\"ranks\": \"4\", \"hosts\": \"2\", \"ranks_per_host\": \"2\", \"hysteresis\": \"0.03\"},
  \"entries\": [{\"op\": \"all_to_all\", \"dtype_class\": \"any\", \"group_size\": 4, \"hosts\": 2,
                 \"ranks_per_host\": 2, \"form\": \"async\",
                 \"ranges\": [{\"min_bytes\": 0, \"max_bytes\": null, \"backend\": \"mpi\"}]}],
  \"samples\": [${samples}]}")

# A trace as MCR_LOG=trace writes it: one event per rank and operation; `slow` is rank 3's latency.
# With a fourth argument, the host map as written at finalize (ranks 0, 1 on host 0; 2, 3 on 1).
function(write_trace path backend slow)
  set(events "")
  set(sep "")
  if(ARGC GREATER 3)
    foreach(rank RANGE 0 3)
      math(EXPR host "${rank} / 2")
      string(APPEND events "${sep}{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": ${rank}, "
             "\"tid\": 0, \"args\": {\"name\": \"rank ${rank}\", \"host\": ${host}}}")
      set(sep ",\n")
    endforeach()
  endif()
  foreach(seq RANGE 0 2)
    foreach(rank RANGE 0 3)
      set(dur 100)
      if(rank EQUAL 3)
        set(dur ${slow})
      endif()
      math(EXPR ts "${seq} * 100000")
      string(APPEND events "${sep}{\"ph\": \"X\", \"name\": \"all_to_all\", \"cat\": \"${backend}\", "
             "\"pid\": ${rank}, \"tid\": 1, \"ts\": ${ts}, \"dur\": ${dur}, \"args\": {\"sequence\": ${seq}, "
             "\"bytes\": 327680, \"count\": 81920, \"dtype\": \"fp32\", \"async\": true, "
             "\"group\": \"0000000000000000\", \"group_rank\": ${rank}, \"group_size\": 4}}")
      set(sep ",\n")
    endforeach()
  endforeach()
  file(WRITE ${path} "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n${events}\n]}\n")
endfunction()
write_trace(${OUT}/run-mpi.json mpi 12000)
write_trace(${OUT}/run-gloo.json gloo 10000 hosts)

set(refined ${OUT}/refined.json)
file(REMOVE ${refined})
execute_process(COMMAND ${MCR} tune --refine ${table} --from-trace ${OUT}/run-mpi.json,${OUT}/run-gloo.json
                        --min-ops 3 -o ${refined}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mcr tune --refine failed (${rc}):\n${out}${err}")
endif()
# The point: 4 ranks on 2 x 2 (the Gloo trace's host map; the MPI trace has none and its whole-job
# operations pool with them), async, 327680 bytes, MPI before, Gloo after, Gloo's median first.
if(NOT out MATCHES "all_to_all +any +4 +2x2 +async +327680 +mpi +gloo +gloo: 10000.0, 3; mpi: 12000.0, 3")
  message(FATAL_ERROR "the refined point is not listed as expected:\n${out}")
endif()
file(READ ${refined} text)
string(JSON n LENGTH "${text}" entries 0 ranges)
string(JSON middle GET "${text}" entries 0 ranges 1 backend)
string(JSON lo GET "${text}" entries 0 ranges 1 min_bytes)
if(NOT n EQUAL 3 OR NOT middle STREQUAL "gloo" OR NOT lo EQUAL 293086)  # ceil(sqrt(262144 * 327680))
  message(FATAL_ERROR "refined ranges: ${n} ranges, the second '${middle}' from ${lo}:\n${text}")
endif()
string(FIND "${text}" "\"source\": \"run\"" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the run's medians are not kept as samples of source \"run\":\n${text}")
endif()
execute_process(COMMAND ${MCR} tune --validate ${refined} RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the refined table does not validate:\n${out}")
endif()

# The same runs with a host map of 4 x 1 (every rank on a host of its own): not the table's 2 x 2,
# so nothing is refined, and the point says why.
file(READ ${OUT}/run-gloo.json other)
string(REGEX REPLACE "\"rank ([0-9])\", \"host\": [0-9]" "\"rank \\1\", \"host\": \\1" other "${other}")
file(WRITE ${OUT}/run-gloo-4x1.json "${other}")
execute_process(COMMAND ${MCR} tune --refine ${table} --from-trace ${OUT}/run-mpi.json,${OUT}/run-gloo-4x1.json
                        --min-ops 3 -o ${OUT}/refined-4x1.json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "4x1 +async +327680 +- +- +gloo: 10000.0, 3\n +not refined: the traced job ran on 4x1; the table was measured on 2x2")
  message(FATAL_ERROR "a 4 x 1 trace against the 2 x 2 table (${rc}):\n${out}${err}")
endif()

function(expect_refusal expected)
  execute_process(COMMAND ${MCR} tune ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(FIND "${err}" "${expected}" at)
  if(rc EQUAL 0 OR at EQUAL -1)
    message(FATAL_ERROR "mcr tune ${ARGN}: rc ${rc}, expected\n  ${expected}\ngot:\n${err}${out}")
  endif()
endfunction()
expect_refusal("--refine needs --from-trace" --refine ${table} -o ${OUT}/x.json)
expect_refusal("needs -o with another file" --refine ${table} --from-trace ${OUT}/run-mpi.json -o ${table})
expect_refusal("--from-trace is read by --refine only" --from-trace ${OUT}/run-mpi.json)
expect_refusal("needs -o with another file" --refine ${table} --from-trace ${OUT}/run-mpi.json
               -o ${OUT}/./table.json)
expect_refusal("--hysteresis 1: must be in [0, 1)" --refine ${table} --from-trace ${OUT}/run-mpi.json
               -o ${OUT}/y.json --hysteresis 1)
expect_refusal("mcr: error: --min-ops 0: a backend's median needs at least one operation" --refine
               ${table} --from-trace ${OUT}/run-mpi.json -o ${OUT}/y.json --min-ops 0)
