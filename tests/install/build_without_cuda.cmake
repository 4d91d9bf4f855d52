# A build configured without CUDA (MCR_WITH_CUDA=OFF, as on a machine without the toolkit) compiles
# the stand-ins of the device code (src/comm/device/no_device.cpp, codesign's GPU runner) with
# warnings as errors, and its CLI says so. The libraries and the CLI only, to keep CI short.
# cmake -DSOURCE_DIR=... -DWORK_DIR=... -P build_without_cuda.cmake
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(RUN_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
run("configuring without CUDA"
    ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR} -G Ninja -DCMAKE_BUILD_TYPE=Release
    -DMCR_WITH_CUDA=OFF -DMCR_WITH_TORCH=OFF -DMCR_WERROR=ON)
run("building without CUDA"
    ${CMAKE_COMMAND} --build ${WORK_DIR} --target mcr_comm mcr_codesign mcr_bench mcr_plan mcr)
run("mcr info without CUDA" ${WORK_DIR}/bin/mcr info --json)
string(JSON cuda ERROR_VARIABLE json_error GET "${RUN_OUTPUT}" build cuda)
string(JSON nccl ERROR_VARIABLE json_error2 GET "${RUN_OUTPUT}" build nccl)
if(NOT cuda STREQUAL "off" OR NOT nccl STREQUAL "off")
  message(FATAL_ERROR "mcr info of the build without CUDA says cuda='${cuda}' nccl='${nccl}' "
                      "(${json_error}${json_error2})")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
