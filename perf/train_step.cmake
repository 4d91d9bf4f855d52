# A data-parallel GPT training step (real CBLAS GEMMs, real mcr all_reduce), the measured side of
# the planner's end-to-end check (scripts/plan-check, docs/planner.md).
if(MCR_WITH_BLAS AND MCR_WITH_MPI)
  add_executable(train_step ${CMAKE_CURRENT_LIST_DIR}/train_step.cpp)
  target_include_directories(train_step SYSTEM PRIVATE ${CBLAS_INCLUDE_DIR})
  target_link_libraries(train_step PRIVATE mcr::comm MPI::MPI_C BLAS::BLAS
                                           nlohmann_json::nlohmann_json fmt::fmt mcr_warnings)
  target_compile_definitions(train_step PRIVATE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
  # sqrt, exp and tanh without errno, so that the element-wise loops can vectorise.
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(train_step PRIVATE -fno-math-errno)
  endif()
  set_target_properties(train_step PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
  # The per-element rate of the step's memory-bound kernels on this CPU (data/systems/local-cpu).
  add_executable(train_step_elementwise ${CMAKE_CURRENT_LIST_DIR}/train_step_elementwise.cpp)
  target_include_directories(train_step_elementwise SYSTEM PRIVATE ${CBLAS_INCLUDE_DIR})
  target_link_libraries(train_step_elementwise PRIVATE MPI::MPI_C BLAS::BLAS
                                                       nlohmann_json::nlohmann_json mcr_warnings)
  target_compile_definitions(train_step_elementwise PRIVATE OMPI_SKIP_MPICXX=1
                                                            MPICH_SKIP_MPICXX=1)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(train_step_elementwise PRIVATE -fno-math-errno)
  endif()
  set_target_properties(train_step_elementwise PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                                                          ${PROJECT_BINARY_DIR}/bin)
endif()
# A few small steps as a test, so the program and its all_reduce check keep working.
if(TARGET train_step AND MCR_BUILD_TESTS)
  add_test(NAME bench.train_step.np2
           COMMAND ${CMAKE_COMMAND} -DMPIEXEC=${MPIEXEC_EXECUTABLE}
                   -DTRAIN_STEP=$<TARGET_FILE:train_step>
                   -P ${PROJECT_SOURCE_DIR}/tests/cli/check_train_step.cmake)
  set_tests_properties(bench.train_step.np2 PROPERTIES TIMEOUT 120 PROCESSORS 2
                                                       LABELS "plan;mpi;bench")
endif()
# The element-wise rate program on tiny tensors: it runs and prints its rates, and refuses bad sizes.
if(TARGET train_step_elementwise AND MCR_BUILD_TESTS)
  add_test(NAME bench.train_step_elementwise
           COMMAND train_step_elementwise --hidden 64 --heads 4 --seq 16 --micro-batch 1 --vocab 128
                   --params 1000 --reps 3)
  set_tests_properties(bench.train_step_elementwise PROPERTIES TIMEOUT 60 LABELS "plan;bench"
                       PASS_REGULAR_EXPRESSION "\"optimizer\"")
  add_test(NAME bench.train_step_elementwise_bad_size COMMAND train_step_elementwise --hidden 0)
  set_tests_properties(bench.train_step_elementwise_bad_size PROPERTIES TIMEOUT 60
                       LABELS "plan;bench" PASS_REGULAR_EXPRESSION "--hidden is '0'")
endif()
