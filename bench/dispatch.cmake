# Dispatch overhead: raw MPI against the same calls through mcr, in one run.
if(MCR_WITH_MPI)
  add_executable(bench_dispatch ${CMAKE_CURRENT_LIST_DIR}/dispatch_overhead.cpp)
  target_link_libraries(bench_dispatch PRIVATE mcr::comm MPI::MPI_C fmt::fmt mcr_warnings)
  target_compile_definitions(bench_dispatch PRIVATE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
  set_target_properties(bench_dispatch PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
endif()
