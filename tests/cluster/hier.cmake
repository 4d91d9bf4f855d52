# The composed backend `hier` on real hosts (docs/hier-backend.md): include() from
# tests/cluster/CMakeLists.txt. 2 hosts x 2 ranks, mpi and gloo both up: every op hier composes on
# every dtype, sync and async, plus a rule that selects it; then the randomized mixing test with
# hier among the backends it draws (4 seeds x 300 ops). Each brings up its own cluster; 6 s and
# 9 s on a loaded 2-core machine.
if(TARGET mcr_mpi_hier_test AND TARGET mcr_mpi_mixing_test)
  add_test(NAME cluster.hier.2x2
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_on_cluster.sh --hosts 2 --ranks-per-host 2
                   --backends auto --limit 75 -- -x MCR_RULES=reduce_scatter:64K-=hier
                   $<TARGET_FILE:mcr_mpi_hier_test>)
  set_tests_properties(cluster.hier.2x2 PROPERTIES TIMEOUT 90 LABELS cluster SKIP_RETURN_CODE 77
                                                   RESOURCE_LOCK mcr_cluster PROCESSORS 2)
  add_test(NAME cluster.hier.mixing
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_on_cluster.sh --hosts 2 --ranks-per-host 2
                   --backends auto --limit 75 -- $<TARGET_FILE:mcr_mpi_mixing_test> --seeds=51-54 --ops=300)
  set_tests_properties(cluster.hier.mixing PROPERTIES TIMEOUT 90 LABELS cluster
                                                      SKIP_RETURN_CODE 77
                                                      RESOURCE_LOCK mcr_cluster PROCESSORS 2)
endif()
# hier's per-step selection from a table tuned on the cluster (tests/cluster/hier_tune.sh).
if(TARGET mcr_cli)
  add_test(NAME cluster.hier.tuned_steps
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/hier_tune.sh $<TARGET_FILE:mcr_cli>
                   ${CMAKE_CURRENT_BINARY_DIR}/hier_tune)
  set_tests_properties(cluster.hier.tuned_steps PROPERTIES TIMEOUT 120 LABELS cluster
                       SKIP_RETURN_CODE 77 RESOURCE_LOCK mcr_cluster PROCESSORS 2)
endif()
