# Raw Gloo against mcr's Gloo backend, in one run
# (docs/performance/bench-and-tuning.md#gloo-vs-raw-gloo and
# docs/performance/bench-and-tuning.md#gloo-sleeping-waits).
if(MCR_WITH_MPI AND MCR_WITH_GLOO)
  add_executable(bench_gloo_raw ${CMAKE_CURRENT_LIST_DIR}/gloo_raw_probe.cpp)
  target_link_libraries(bench_gloo_raw PRIVATE mcr::comm gloo fmt::fmt mcr_warnings)
  set_target_properties(bench_gloo_raw PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
  # A short run as a test, so the program keeps working (it checks the reduced values).
  if(COMMAND mcr_add_mpi_test)
    mcr_add_mpi_test(NAME bench.gloo_raw.np2 COMMAND bench_gloo_raw RANKS 2 TIMEOUT 90
                     ARGS --reps 3 --max-bytes 65536 --block-ms 2 LABELS bench)
    mcr_add_mpi_test(NAME bench.gloo_raw.send_recv.np2 COMMAND bench_gloo_raw RANKS 2 TIMEOUT 90
                     ARGS --op send_recv --reps 3 --max-bytes 65536 --block-ms 2 LABELS bench)
  endif()
endif()
