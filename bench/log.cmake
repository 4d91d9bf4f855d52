# Communication log overhead: the same calls with and without a log attached, in one run.
add_executable(bench_log_overhead ${CMAKE_CURRENT_LIST_DIR}/log_overhead.cpp)
target_link_libraries(bench_log_overhead PRIVATE mcr::comm fmt::fmt mcr_warnings)
set_target_properties(bench_log_overhead PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
