# Runs recorder_hang at 3 ranks with a 5 s timeout (the waiting rank that is not the first to time
# out must have published its progress by then, 1-1.25 s after it issued; 3 s left a loaded
# machine little slack to name exactly the laggard), then checks the watchdog's line, the flight
# records, the MCR_LOG files written on the way out, and what `mcr doctor` makes of the records.
# -DMPIEXEC -DHANG -DMCR -DDIR
include(${CMAKE_CURRENT_LIST_DIR}/../../../cmake/McrMpiexec.cmake)
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
set(ENV{MCR_TIMEOUT} 5)
set(ENV{MCR_FLIGHT_DIR} ${DIR})
set(ENV{MCR_LOG} summary)
set(ENV{MCR_LOG_FILE} ${DIR}/summary.txt)
set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
string(TIMESTAMP t0 "%s")
# The ranks the first watchdog's MPI_Abort ends (the laggard, and a waiting rank whose own watchdog
# has not fired yet) write their records on the launcher's SIGTERM. Open MPI sends SIGKILL 1 s
# later by default; on a loaded machine a record then went unwritten, so the test allows 10 s.
execute_process(
  COMMAND ${MPIEXEC} ${MCR_MPIEXEC_FLAGS} --mca odls_base_sigkill_timeout 10
          -np 3 ${HANG}
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 55)
string(TIMESTAMP t1 "%s")
math(EXPR took "${t1} - ${t0}")
set(all "${out}${err}")
message(STATUS "job ended with ${rc} after ${took} s:\n${all}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the hung job exited 0")
endif()
# 5 s timeout, 2 s watchdog grace, up to 10 s of the launcher's SIGKILL delay, and the start and
# teardown of 3 ranks on 2 loaded cores (about 25 s in all here).
if(took GREATER 42)
  message(FATAL_ERROR "the hung job took ${took} s to end (timeout 5 s + 2 s watchdog grace)")
endif()
# The watchdog line names its rank and the laggard (rank 2, which never reached sequence #3).
if(NOT all MATCHES "TimeoutError: all_reduce \\(sequence #3\\) on backend 'mpi' blocked[^\n]*; rank [01] of group 0 \\(3 ranks; world rank [01]")
  message(FATAL_ERROR "no watchdog line naming its own rank")
endif()
if(NOT all MATCHES "ranks that have not reached sequence #3: 2 \\(world rank 2, [^)]*\\); flight record")
  message(FATAL_ERROR "the watchdog line does not name exactly the laggard rank 2")
endif()
# Flight records: the ranks the watchdog ended and the laggard (killed by the launcher).
foreach(r 0 1 2)
  if(NOT EXISTS ${DIR}/flight-rank${r}.json)
    message(FATAL_ERROR "${DIR}/flight-rank${r}.json was not written")
  endif()
endforeach()
# MCR_LOG on the way out: each watchdog-ended rank writes its own summary.
file(GLOB logs ${DIR}/summary.rank*.txt)
if(NOT logs)
  message(FATAL_ERROR "no MCR_LOG summary (summary.rank<N>.txt) was written after the timeout")
endif()
list(GET logs 0 first_log)
file(READ ${first_log} log_text)
if(NOT log_text MATCHES "communication log of world rank [01] alone" OR NOT log_text MATCHES "all_reduce")
  message(FATAL_ERROR "${first_log} is not this rank's summary:\n${log_text}")
endif()

execute_process(COMMAND ${MCR} doctor ${DIR} OUTPUT_VARIABLE doc RESULT_VARIABLE drc)
message(STATUS "mcr doctor:\n${doc}")
if(NOT drc EQUAL 0)
  message(FATAL_ERROR "mcr doctor failed (${drc})")
endif()
if(NOT doc MATCHES "first unfinished operation: sequence #3: all_reduce fp32 x4")
  message(FATAL_ERROR "mcr doctor does not name the op at sequence #3")
endif()
if(NOT doc MATCHES "never reached by: rank 2 \\(world rank 2; last issued #2 all_reduce \\(completed\\)\\)")
  message(FATAL_ERROR "mcr doctor does not name rank 2 as the laggard")
endif()
if(NOT doc MATCHES "never completed by: rank 0 \\(world rank 0; [a-z_]+\\), rank 1 \\(world rank 1; [a-z_]+\\)")
  message(FATAL_ERROR "mcr doctor does not name ranks 0 and 1 as waiting")
endif()
execute_process(COMMAND ${MCR} doctor ${DIR} --json OUTPUT_VARIABLE js RESULT_VARIABLE jrc)
string(JSON n LENGTH "${js}" laggards)
string(JSON first GET "${js}" laggards 0)
if(NOT jrc EQUAL 0 OR NOT n EQUAL 1 OR NOT first EQUAL 2)
  message(FATAL_ERROR "mcr doctor --json: laggards should be [2]:\n${js}")
endif()
