# Dispatch overhead: raw MPI against the same calls through mcr, in one run.
if(MCR_WITH_MPI)
  add_executable(bench_dispatch ${CMAKE_CURRENT_LIST_DIR}/dispatch_overhead.cpp)
  target_link_libraries(bench_dispatch PRIVATE mcr::bench MPI::MPI_C fmt::fmt mcr_warnings)
  target_compile_definitions(bench_dispatch PRIVATE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
  set_target_properties(bench_dispatch PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
  # The same path counted in instructions under callgrind (tests/perf: the regression guard).
  add_executable(bench_dispatch_instructions ${CMAKE_CURRENT_LIST_DIR}/dispatch_instructions.cpp)
  target_link_libraries(bench_dispatch_instructions PRIVATE mcr::comm fmt::fmt mcr_warnings)
  set_target_properties(bench_dispatch_instructions PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                                                               ${PROJECT_BINARY_DIR}/bin)
endif()
# A short run as a test, so the program keeps working (it checks the reduced values).
if(MCR_WITH_MPI AND COMMAND mcr_add_mpi_test)
  mcr_add_mpi_test(NAME bench.dispatch.np2 COMMAND bench_dispatch RANKS 2 TIMEOUT 60
                   ARGS --iters 200 --reps 3 LABELS bench)
endif()
