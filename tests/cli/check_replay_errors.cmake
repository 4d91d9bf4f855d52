cmake_minimum_required(VERSION 3.25)
# mcr replay rejects bad traces with a message naming the file, the op, the field, the value and
# the rule, before any rank communicates; a trace needing more ranks than the job has; and a
# replay whose own log would overwrite its trace.
file(MAKE_DIRECTORY ${OUT})
set(n 0)
function(expect_error body expected)
  math(EXPR i "${n} + 1")
  set(n ${i} PARENT_SCOPE)
  set(file ${OUT}/bad${i}.json)
  file(WRITE ${file} "${body}")
  execute_process(COMMAND ${MCR} replay ${file} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  string(FIND "${err}" "mcr: error: ${file}: ${expected}" at)
  if(rc EQUAL 0 OR at EQUAL -1)
    message(FATAL_ERROR "bad trace ${i} (${body}): rc ${rc}, expected the error\n  ${expected}\ngot:\n${err}${out}")
  endif()
endfunction()
set(head "{\"format\": \"mcr-trace\", \"version\": 1, ")
expect_error("${head} \"ops\": [{\"op\": \"all_reduce\", \"count\": 12, \"dtype\": \"f33\"}]}"
             "ops[0].dtype \"f33\": unknown element type (use fp32, fp64, fp16, bf16, i8, u8, i32, i64)")
expect_error("${head} \"ops\": [{\"op\": \"all_reduce\", \"count\": 12}, {\"op\": \"allreduse\", \"count\": 12}]}"
             "ops[1].op \"allreduse\": unknown operation (known: send, broadcast, reduce, all_reduce")
expect_error("${head} \"ops\": [{\"op\": \"all_gather\", \"count\": 12, \"bytes\": 48}]}"
             "ops[0] {\"bytes\":48,\"count\":12,\"op\":\"all_gather\"}: needs exactly one of \"bytes\" and \"count\"")
expect_error("${head} \"ops\": [{\"op\": \"all_reduce\", \"bytes\": 6, \"dtype\": \"f32\"}]}"
             "ops[0].bytes 6: must be a multiple of the fp32 element size 4")
expect_error("${head} \"ops\": [{\"op\": \"broadcast\", \"count\": 12, \"group\": [0, 1], \"root\": 2}]}"
             "ops[0].root 2: must be a rank of the op's group of 2")
expect_error("${head} \"ops\": [{\"op\": \"all_reduce\", \"count\": 12, \"group\": [1, 1]}]}"
             "ops[0].group [1,1]: rank 1 is listed twice")
expect_error("${head} \"ops\": [{\"op\": \"all_reduce\", \"count\": 12, \"wait\": true}]}"
             "ops[0].wait true: only an async op can be a wait point")
expect_error("${head} \"ops\": [{\"op\": \"all_reduce\", \"count\": 12, \"repaet\": 2}]}"
             "ops[0].repaet 2: unknown field (a typo?)")
expect_error("${head} \"world_size\": 2, \"ops\": [{\"op\": \"all_reduce\", \"count\": 12, \"group\": [0, 3]}]}"
             "world_size 2: the ops name ranks up to 3, so at least 4 ranks are needed")
expect_error("{\"format\": \"nccl\", \"ops\": []}"
             "format \"nccl\": must be \"mcr-trace\"")
expect_error("{\"format\": \"mcr-trace\", ops: []}" "not valid JSON")
# Valid, but for 4 ranks: rejected on 1 rank before the replay starts.
set(file ${OUT}/four.json)
file(WRITE ${file} "${head} \"ops\": [{\"op\": \"all_reduce\", \"count\": 12, \"group\": [0, 3]}]}")
execute_process(COMMAND ${MCR} replay ${file} RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "four.json: the trace needs 4 ranks, but this job has 1")
  message(FATAL_ERROR "a 4-rank trace on 1 rank: rc ${rc}:\n${err}")
endif()
# MCR_LOG left set from the recorded run: the replay's own trace or summary would overwrite the
# trace it replays. Refused, the trace unchanged; another MCR_TRACE_FILE is fine.
set(file ${OUT}/recorded.json)
set(body "${head} \"ops\": [{\"op\": \"all_reduce\", \"count\": 12}]}")
file(WRITE ${file} "${body}")
execute_process(COMMAND ${CMAKE_COMMAND} -E env MCR_LOG=summary,trace MCR_TRACE_FILE=${file}
                        ${MCR} replay ${file} --reps 1 -w 0
                RESULT_VARIABLE rc ERROR_VARIABLE err)
file(READ ${file} after)
if(rc EQUAL 0 OR NOT err MATCHES "is where MCR_LOG writes this replay's own log \\(MCR_TRACE_FILE="
   OR NOT after STREQUAL body)
  message(FATAL_ERROR "a replay logging over its own trace: rc ${rc}:\n${err}\nthe file now:\n${after}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env MCR_LOG=summary MCR_LOG_FILE=${file}
                        ${MCR} replay ${file} --reps 1 -w 0
                RESULT_VARIABLE rc ERROR_VARIABLE err)
file(READ ${file} after)
if(rc EQUAL 0 OR NOT err MATCHES "\\(MCR_LOG_FILE=" OR NOT after STREQUAL body)
  message(FATAL_ERROR "a replay whose summary would overwrite its trace: rc ${rc}:\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env MCR_LOG=trace MCR_TRACE_FILE=${OUT}/replayed.json
                        ${MCR} replay ${file} --reps 1 -w 0
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(READ ${file} after)
if(NOT rc EQUAL 0 OR NOT EXISTS ${OUT}/replayed.json OR NOT after STREQUAL body)
  message(FATAL_ERROR "a replay logging to another file: rc ${rc}:\n${err}${out}")
endif()
