cmake_minimum_required(VERSION 3.25)
# MCR_LOG's files. A summary that fails as it is written (/dev/full: no space left) leaves the
# trace written, and says why (the first failure skipped the trace); the trace goes through a
# temporary file renamed into place, none left behind. A path that cannot be written at all (no such
# directory, a directory) is refused at init(), before the run, naming the variable and the rule.
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
execute_process(COMMAND ${CMAKE_COMMAND} -E env MCR_LOG=summary,trace MCR_LOG_FILE=/dev/full
                        MCR_TRACE_FILE=${OUT}/trace.json
                        ${MCR} bench --op all_reduce -b 4 -e 4 --iters 2 --warmup 1
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mcr bench failed (${rc}):\n${out}${err}")
endif()
if(NOT err MATCHES "communication summary not written: MCR_LOG_FILE: '/dev/full' cannot be written: No space left on device")
  message(FATAL_ERROR "the summary's failure was not said, or not why:\n${err}")
endif()
if(NOT EXISTS ${OUT}/trace.json OR NOT err MATCHES "communication trace \\([0-9]+ events\\) written to ${OUT}/trace.json")
  message(FATAL_ERROR "the trace was not written after the summary failed:\n${err}")
endif()
file(GLOB left ${OUT}/*.tmp*)
if(left)
  message(FATAL_ERROR "temporary files left behind: ${left}")
endif()

function(expect_refused what env_var value rule)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env MCR_LOG=summary,trace ${env_var}=${value}
                          ${MCR} bench --op all_reduce -b 4 -e 4 --iters 2 --warmup 1
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "${env_var}='${value}': ${rule}")
    message(FATAL_ERROR "${what}: not refused at init (${rc}) with '${rule}':\n${out}${err}")
  endif()
  if(out MATCHES "all_reduce")
    message(FATAL_ERROR "${what}: the benchmark ran before the refusal:\n${out}")
  endif()
endfunction()
expect_refused("a summary in a missing directory" MCR_LOG_FILE ${OUT}/no-such-dir/summary.txt
               "directory '${OUT}/no-such-dir' does not exist")
expect_refused("a trace at a directory" MCR_TRACE_FILE ${OUT} "is a directory")
