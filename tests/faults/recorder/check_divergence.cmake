# `mcr doctor` on two hand-made records (divergence/): at sequence #0 both ranks ran an
# all_gather_v, of 3 and 5 elements (uneven counts are that op's use, not a divergence); at
# sequence #1 rank 0 issued an all_reduce and rank 1 a broadcast. The doctor must name sequence #1
# and both calls. In BACKEND_DIR (divergence_backend/) both ranks issued the same all_reduce at #0,
# rank 0 on mpi and rank 1 on gloo (MCR_VERIFY=0 and a backend forced on one rank): each waits in a
# library the other never enters, which the doctor must name too. In P2P_DIR (p2p_shift/) rank 0
# sent to rank 2 first, so rank 0's and rank 2's sequence numbers are one ahead of rank 1's: the
# broadcast is collective #1 everywhere, rank 2 never reached it (it waits in a recv), and no
# divergence is seen where the numbers differ. In LATER_DIR (later_only/) rank 1's record file is
# missing (its writer was killed before renaming it into place) and its earliest later dump
# (later-1) stands in; later-2 is not read. In LATER_SNAPSHOT_DIR (later_snapshot_first/) rank 1's
# record file is missing too, and its earliest later dump is a SIGUSR1 snapshot taken before the
# SIGTERM's dump (later-2): the failure's dump stands in, not the snapshot. In STALE_DIR (stale_async/) ranks 0 and 1 issued an
# iall_reduce, then a blocking all_reduce they time out in; rank 2 completed the iall_reduce and
# issued nothing more. Ranks 0 and 1 never polled the iall_reduce's handle, so their records still
# say "started": the doctor named that collective, every rank having reached it, and no laggard.
# In RACE_DIR (snapshot_race/) rank 0's timeout came while a SIGUSR1 snapshot was being written to
# its record file, so it went beside it (later-1) and the snapshot took the record file: the
# doctor read the snapshot, where every op had completed, and named no laggard. In RACE_EXIT_DIR
# (snapshot_race_exit/) the exit hook's dump then took the record file from the snapshot: the
# earliest dump that explains a failure (later-1) is still the one read. snapshot_race/'s records
# say whether each is a snapshot; snapshot_race_exit/'s do not, as records written before that field
# (the doctor judges those by their reason).
# -DMCR -DDIR -DBACKEND_DIR -DP2P_DIR -DLATER_DIR -DLATER_SNAPSHOT_DIR -DSTALE_DIR -DRACE_DIR -DRACE_EXIT_DIR
execute_process(COMMAND ${MCR} doctor ${DIR} OUTPUT_VARIABLE doc RESULT_VARIABLE rc)
message(STATUS "mcr doctor:\n${doc}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mcr doctor failed (${rc})")
endif()
if(NOT doc MATCHES "ranks diverge at sequence #1:\n    rank 0 \\(world rank 0\\): all_reduce fp32 x4[^\n]*\n    rank 1 \\(world rank 1\\): broadcast fp32 x4 \\(16 B\\), root/peer 0")
  message(FATAL_ERROR "mcr doctor does not report the divergence at sequence #1")
endif()
execute_process(COMMAND ${MCR} doctor ${DIR} --json OUTPUT_VARIABLE js)
string(JSON seq GET "${js}" groups 0 divergence seq)
if(NOT seq EQUAL 1)
  message(FATAL_ERROR "mcr doctor --json: divergence.seq is '${seq}', expected 1")
endif()
# Bad input: a directory without records is an error naming it.
execute_process(COMMAND ${MCR} doctor ${DIR}/.. ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc EQUAL 0 OR NOT err MATCHES "holds no flight records")
  message(FATAL_ERROR "mcr doctor on a directory without records: rc ${rc}, '${err}'")
endif()
# The same call on two backends is a divergence.
execute_process(COMMAND ${MCR} doctor ${BACKEND_DIR} OUTPUT_VARIABLE doc RESULT_VARIABLE rc)
message(STATUS "mcr doctor (backends):\n${doc}")
if(NOT rc EQUAL 0 OR NOT doc MATCHES "ranks diverge at sequence #0:\n    rank 0 \\(world rank 0\\): all_reduce fp32 x4 \\(16 B\\) on mpi, sync\n    rank 1 \\(world rank 1\\): all_reduce fp32 x4 \\(16 B\\) on gloo, sync")
  message(FATAL_ERROR "mcr doctor does not report the two backends of sequence #0 (rc ${rc})")
endif()
# Collectives are matched by their index among the collectives, not by sequence number.
execute_process(COMMAND ${MCR} doctor ${P2P_DIR} OUTPUT_VARIABLE doc RESULT_VARIABLE rc)
message(STATUS "mcr doctor (send/recv):\n${doc}")
if(NOT rc EQUAL 0
   OR NOT doc MATCHES "first unfinished operation: collective #1 \\(sequence #2 on rank 0, #1 on rank 1;[^\n]*: broadcast fp32 x4"
   OR NOT doc MATCHES "never reached by: rank 2 \\(world rank 2; last issued #2 recv \\(issued\\)\\)"
   OR NOT doc MATCHES "unfinished send/recv: rank 2 \\(world rank 2\\): sequence #2 recv fp32 x4"
   OR NOT doc MATCHES "no divergence"
   OR NOT doc MATCHES "laggards [^\n]*: world rank\\(s\\) 2\n")
  message(FATAL_ERROR "mcr doctor does not match collectives across send/recv (rc ${rc})")
endif()
# A rank whose record file is missing is read from its earliest later dump.
execute_process(COMMAND ${MCR} doctor ${LATER_DIR} OUTPUT_VARIABLE doc ERROR_VARIABLE err
                RESULT_VARIABLE rc)
message(STATUS "mcr doctor (later dumps):\n${doc}${err}")
if(NOT rc EQUAL 0 OR NOT doc MATCHES "2 flight record\\(s\\)"
   OR NOT doc MATCHES "world rank 1 on [^\n]*: SIGTERM"
   OR NOT doc MATCHES "ranks diverge at sequence #0:")
  message(FATAL_ERROR "mcr doctor does not read rank 1's earliest later dump (rc ${rc})")
endif()
execute_process(COMMAND ${MCR} doctor ${LATER_SNAPSHOT_DIR} OUTPUT_VARIABLE doc ERROR_VARIABLE err
                RESULT_VARIABLE rc)
message(STATUS "mcr doctor (a snapshot before the failure's dump):\n${doc}${err}")
if(NOT rc EQUAL 0 OR NOT doc MATCHES "world rank 1 on [^\n]*: SIGTERM")
  message(FATAL_ERROR "mcr doctor reads rank 1's snapshot, not the failure's later dump (rc ${rc})")
endif()
# An asynchronous collective every rank reached and one completed is not where the job waits.
execute_process(COMMAND ${MCR} doctor ${STALE_DIR} OUTPUT_VARIABLE doc RESULT_VARIABLE rc)
message(STATUS "mcr doctor (unpolled async):\n${doc}")
if(NOT rc EQUAL 0
   OR NOT doc MATCHES "first unfinished operation: sequence #1: all_reduce fp32 x4 \\(16 B\\) on gloo, sync"
   OR NOT doc MATCHES "never reached by: rank 2 \\(world rank 2"
   OR NOT doc MATCHES "laggards [^\n]*: world rank\\(s\\) 2\n")
  message(FATAL_ERROR "mcr doctor blames the ranks waiting, not rank 2 (rc ${rc})")
endif()
# A failure's record that went beside a snapshot stands in for the snapshot, and for the exit
# hook's dump that took the record file from it.
foreach(race ${RACE_DIR} ${RACE_EXIT_DIR})
  execute_process(COMMAND ${MCR} doctor ${race} OUTPUT_VARIABLE doc RESULT_VARIABLE rc)
  message(STATUS "mcr doctor (${race}):\n${doc}")
  if(NOT rc EQUAL 0 OR NOT doc MATCHES "world rank 0 on node0 \\(pid 100\\): timeout of sequence #1"
     OR NOT doc MATCHES "laggards [^\n]*: world rank\\(s\\) 1\n")
    message(FATAL_ERROR "mcr doctor in ${race} does not read the timeout's record (rc ${rc})")
  endif()
endforeach()
