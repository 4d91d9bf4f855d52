# Cost of cross-rank verification (MCR_VERIFY): a small all_reduce verified and not, in one run.
add_executable(bench_verify ${CMAKE_CURRENT_LIST_DIR}/verify_overhead.cpp)
target_link_libraries(bench_verify PRIVATE mcr::bench fmt::fmt mcr_warnings)
set_target_properties(bench_verify PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
