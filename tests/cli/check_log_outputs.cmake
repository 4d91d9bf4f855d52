cmake_minimum_required(VERSION 3.25)
# MCR_LOG=summary,trace with a summary file that cannot be written: the trace is still written, and
# the summary's failure is said (the first failure skipped the trace).
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
execute_process(COMMAND ${CMAKE_COMMAND} -E env MCR_LOG=summary,trace
                        MCR_LOG_FILE=${OUT}/no-such-dir/summary.txt MCR_TRACE_FILE=${OUT}/trace.json
                        ${MCR} bench --op all_reduce -b 4 -e 4 --iters 2 --warmup 1
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mcr bench failed (${rc}):\n${out}${err}")
endif()
if(NOT err MATCHES "communication summary not written: MCR_LOG_FILE='${OUT}/no-such-dir/summary.txt' cannot be written")
  message(FATAL_ERROR "the summary's failure was not said:\n${err}")
endif()
if(NOT EXISTS ${OUT}/trace.json OR NOT err MATCHES "communication trace \\([0-9]+ events\\) written to ${OUT}/trace.json")
  message(FATAL_ERROR "the trace was not written after the summary failed:\n${err}")
endif()
