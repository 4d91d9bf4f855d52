cmake_minimum_required(VERSION 3.25)
# Runs the C++ training step (perf/train_step.cpp) for a few small steps on 2 ranks and checks its
# JSON: every documented field is present, the timings are positive, and the gradient all_reduce
# matched the independent check. Timings are not compared with anything: this only keeps the
# program working for scripts/plan-check.
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/McrMpiexec.cmake)
execute_process(COMMAND ${MPIEXEC} ${MCR_MPIEXEC_FLAGS} -np 2 ${TRAIN_STEP}
                        --hidden 64 --heads 4 --layers 2 --seq 32 --micro-batch 2 --vocab 256
                        --steps 3 --warmup 1 --bucket-mb 0.05
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "train_step failed (${rc}):\n${out}\n${err}")
endif()
string(JSON verified GET "${out}" all_reduce_verified)
if(NOT verified)
  message(FATAL_ERROR "all_reduce_verified = ${verified}")
endif()
string(JSON buckets GET "${out}" buckets)
if(buckets LESS 2)
  message(FATAL_ERROR "expected several gradient buckets, got ${buckets}")
endif()
foreach(path "step_time_s;median" "step_time_s;ci95_low" "step_time_s;ci95_high" "cpu_time_s;median"
             "split_s;gemm;median" "split_s;comm;median" "gemm_flops_per_step" "gradient_bytes")
  string(JSON v GET "${out}" ${path})
  if(NOT v GREATER 0)
    message(FATAL_ERROR "${path} = ${v}")
  endif()
endforeach()
string(JSON other GET "${out}" split_s other median)
string(JSON steps GET "${out}" steps)
if(NOT steps EQUAL 3)
  message(FATAL_ERROR "steps = ${steps}")
endif()
message(STATUS "train_step: ${buckets} buckets verified; other ${other} s")
