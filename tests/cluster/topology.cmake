# Tuning tables and topology across namespace hosts (include() from tests/cluster/CMakeLists.txt,
# which defines _cluster_dir): a table measured on 1x2 is not applied on a 2x1 cluster, one
# measured on 2x1 is, and `mcr tune` there records 2x1. One cluster, three short mpiruns.
if(TARGET mcr_cli)
  add_test(NAME cluster.topology_table
           COMMAND ${_cluster_dir}/topology_table.sh $<TARGET_FILE:mcr_cli>
                   ${CMAKE_CURRENT_BINARY_DIR}/topology_table)
  set_tests_properties(cluster.topology_table PROPERTIES TIMEOUT 90 LABELS cluster
                       SKIP_RETURN_CODE 77 RESOURCE_LOCK mcr_cluster PROCESSORS 2)
endif()
