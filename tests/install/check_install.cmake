# Installs this build into a fresh prefix, builds tests/install/consumer against it with
# find_package(mcr), runs the consumer on 2 ranks, runs the installed `mcr shape` from a directory
# outside the source and build trees, and builds and runs the consumer again through pkg-config.
# cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DMPIEXEC=... -P check_install.cmake
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/McrMpiexec.cmake)
function(run)
  cmake_parse_arguments(R "" "WORKING_DIRECTORY;WHAT" "COMMAND" ${ARGN})
  execute_process(COMMAND ${R_COMMAND} WORKING_DIRECTORY ${R_WORKING_DIRECTORY}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${R_WHAT} failed (${rc}):\n${out}\n${err}")
  endif()
  set(RUN_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/elsewhere)

run(WHAT "cmake --install" WORKING_DIRECTORY ${WORK_DIR}
    COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f include/mcr/comm.hpp include/mcr/bench/compare.hpp include/mcr/codesign/model.hpp bin/mcr
          share/mcr/devices/h100-sxm.json share/mcr/models/gpt3-2.7b.json
          lib/cmake/mcr/mcrConfig.cmake lib/pkgconfig/mcr.pc)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "not installed: ${prefix}/${f}")
  endif()
endforeach()

run(WHAT "configuring the consumer" WORKING_DIRECTORY ${WORK_DIR}
    COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${WORK_DIR}/consumer -G Ninja
            -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix})
run(WHAT "building the consumer" WORKING_DIRECTORY ${WORK_DIR}
    COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
run(WHAT "the consumer on 2 ranks" WORKING_DIRECTORY ${WORK_DIR}/elsewhere
    COMMAND ${MPIEXEC} ${MCR_MPIEXEC_FLAGS}
            -np 2 ${WORK_DIR}/consumer/consumer)
string(REGEX MATCHALL "all_reduce correct" ok "${RUN_OUTPUT}")
list(LENGTH ok n_ok)
if(NOT n_ok EQUAL 2)
  message(FATAL_ERROR "expected 2 ranks to report a correct all_reduce, got:\n${RUN_OUTPUT}")
endif()

# The installed CLI finds its data beside itself, with no source tree and no MCR_DATA_DIR.
set(ENV{MCR_DATA_DIR} "")
run(WHAT "installed mcr shape" WORKING_DIRECTORY ${WORK_DIR}/elsewhere
    COMMAND ${prefix}/bin/mcr shape --preset gpt3-2.7b --device h100-sxm --json)
string(JSON hidden ERROR_VARIABLE json_error GET "${RUN_OUTPUT}" model h)
if(NOT hidden EQUAL 2560)
  message(FATAL_ERROR "installed `mcr shape` gave model.h = '${hidden}' (${json_error}), not 2560")
endif()

# pkg-config: the consumer again, compiled and linked by hand with what `pkg-config --static`
# gives (the libraries are static), and run on 2 ranks. Not optional: a user without CMake has only
# this file, and a library missing from it fails only at their link.
find_program(PKG_CONFIG pkg-config REQUIRED)
set(ENV{PKG_CONFIG_PATH} "${prefix}/lib/pkgconfig:$ENV{PKG_CONFIG_PATH}")
run(WHAT "pkg-config" WORKING_DIRECTORY ${WORK_DIR}
    COMMAND ${PKG_CONFIG} --static --cflags --libs mcr)
string(STRIP "${RUN_OUTPUT}" pc_flags)
if(NOT pc_flags MATCHES "-I${prefix}/lib/pkgconfig/../../include")
  message(FATAL_ERROR "pkg-config mcr gave: ${pc_flags}")
endif()
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
# The shared libraries it names (CUDA's, say) found at run time as a CMake consumer's are: an
# rpath of each -L directory.
set(pc_rpaths)
foreach(flag IN LISTS pc_flags)
  if(flag MATCHES "^-L(.+)$")
    list(APPEND pc_rpaths "-Wl,-rpath,${CMAKE_MATCH_1}")
  endif()
endforeach()
run(WHAT "building the consumer with pkg-config's flags (${pc_flags})" WORKING_DIRECTORY ${WORK_DIR}
    COMMAND ${CXX} -O1 -o ${WORK_DIR}/consumer-pc ${SOURCE_DIR}/tests/install/consumer/main.cpp
            ${pc_flags} ${pc_rpaths})
run(WHAT "the pkg-config consumer on 2 ranks" WORKING_DIRECTORY ${WORK_DIR}/elsewhere
    COMMAND ${MPIEXEC} ${MCR_MPIEXEC_FLAGS} -np 2 ${WORK_DIR}/consumer-pc)
string(REGEX MATCHALL "all_reduce correct" ok "${RUN_OUTPUT}")
list(LENGTH ok n_ok)
if(NOT n_ok EQUAL 2)
  message(FATAL_ERROR "pkg-config consumer: expected 2 ranks to report a correct all_reduce, got:\n${RUN_OUTPUT}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
message(STATUS "install check passed: ${prefix}")
