cmake_minimum_required(VERSION 3.25)
# Runs `mcr plan --json` for GPT-3 175B on 64 A100s (tp 8, pp 8) and checks the documented fields:
# a positive step time, TFLOP/s per GPU below the A100's 312 dense peak, every breakdown part, and
# memory per GPU within the 80 GiB capacity.
execute_process(COMMAND ${MCR} plan --preset gpt3-175b --system dgx-a100 --gpus 64 --tp 8 --pp 8
                        --global-batch 64 --interleave 3 --recompute selective --sequence-parallel
                        --json
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mcr plan --json failed (${rc}): ${err}")
endif()
string(JSON step GET "${out}" step_time_s)
string(JSON tflops GET "${out}" tflops_per_gpu)
string(JSON mem GET "${out}" memory_per_gpu_bytes)
string(JSON cap GET "${out}" memory capacity_bytes)
if(NOT step GREATER 0)
  message(FATAL_ERROR "step_time_s = ${step}")
endif()
if(NOT tflops GREATER 10 OR NOT tflops LESS 312)
  message(FATAL_ERROR "tflops_per_gpu = ${tflops} outside (10, 312)")
endif()
if(NOT mem GREATER 0 OR mem GREATER cap)
  message(FATAL_ERROR "memory_per_gpu_bytes = ${mem}, capacity ${cap}")
endif()
# Every part of the breakdown is present and not negative.
foreach(k forward_gemm_s backward_gemm_s memory_bound_s recompute_s logits_embedding_s tp_comm_s
          pp_comm_s bubble_s dp_comm_s optimizer_s)
  string(JSON v GET "${out}" breakdown ${k})
  if(v LESS 0)
    message(FATAL_ERROR "breakdown.${k} = ${v}")
  endif()
endforeach()
# Under an FP8 recipe on a bf16 model, MFU divides by FP8's peak: the device peak shown is that one
# (before, it was bf16's while peak_tflops and MFU used FP8's).
execute_process(COMMAND ${MCR} plan --preset llama-3-70b --system dgx-h100 --gpus 8 --tp 8
                        --global-batch 8 --dtype bf16 --fp8 delayed --json
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 AND NOT rc EQUAL 3)
  message(FATAL_ERROR "mcr plan --fp8 delayed --json failed (${rc}): ${err}")
endif()
string(JSON peak GET "${out}" peak_tflops)
string(JSON shown GET "${out}" device_peak tflops)
string(JSON shown_dtype GET "${out}" device_peak dtype)
if(NOT shown EQUAL peak OR NOT shown_dtype STREQUAL "fp8")
  message(FATAL_ERROR "device_peak ${shown_dtype} ${shown} TFLOP/s, but MFU divides by ${peak}")
endif()
