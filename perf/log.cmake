# Communication log overhead: the same calls with and without a log attached, in one run.
add_executable(bench_log_overhead ${CMAKE_CURRENT_LIST_DIR}/log_overhead.cpp)
target_link_libraries(bench_log_overhead PRIVATE mcr::bench fmt::fmt mcr_warnings)
set_target_properties(bench_log_overhead PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
# A short run as a test, so the program keeps working (it checks the results and the record count);
# the figures come from the long runs in docs/performance/bench-and-tuning.md#log-overhead.
if(MCR_WITH_MPI AND COMMAND mcr_add_mpi_test)
  mcr_add_mpi_test(NAME bench.log_overhead.np2 COMMAND bench_log_overhead RANKS 2 TIMEOUT 60
                   ARGS --iters 500 --reps 3 LABELS bench)
endif()
