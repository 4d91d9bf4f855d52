// Internal: the per-microbatch cost of one transformer layer and of the model's ends (embedding,
// logits) on one GPU, from the codesign GEMM model and the bytes the memory-bound kernels move.
#pragma once

#include <string>

#include "mcr/codesign/device.hpp"
#include "mcr/codesign/model.hpp"
#include "mcr/plan/comm_model.hpp"
#include "mcr/plan/layout.hpp"

namespace mcr::plan::detail {

/// Seconds per microbatch for one layer on one GPU.
struct LayerCost {
  double fwd_gemm = 0;
  double bwd_gemm = 0;
  double attn_core_fwd = 0;  ///< forward attention BMMs (what selective recomputation repeats)
  double fwd_mem = 0;        ///< memory-bound kernels, forward
  double bwd_mem = 0;
  double attn_mem_fwd = 0;  ///< softmax + attention dropout, forward (unfused only)
  double tp_fwd = 0;        ///< TP/SP collectives of the forward pass
  double tp_bwd = 0;
  double fwd_flops = 0;  ///< GEMM FLOPs of the forward pass on this GPU
  double attn_core_flops = 0;
};

/// Costs of the pipeline's first and last stage beyond their layers, per microbatch.
struct EndsCost {
  double embedding = 0;      ///< lookup (+ its TP all-reduce), forward and backward
  double logits_gemm = 0;    ///< logits forward, dgrad and wgrad
  double cross_entropy = 0;  ///< memory-bound loss kernels and their TP all-reduces
};

/// Bytes of a memory-bound kernel at the device's achievable bandwidth (the system's
/// stream_efficiency where it gives one), plus one launch each.
double memory_time(double bytes, int kernels, const codesign::DeviceSpec& device,
                   const SystemSpec& system);

/// One class of memory-bound kernel (SystemSpec::elementwise_classes) over `elements` elements
/// moving `bytes`: the elements at the system's measured per-element rate for that class and pass
/// where it gives one, else the bytes at the achievable bandwidth; plus one launch per kernel.
double kernel_time(const std::string& cls, bool backward, double bytes, double elements,
                   int kernels, const codesign::DeviceSpec& device, const SystemSpec& system);

/// `model` has t = tp and b = micro_batch already.
LayerCost layer_cost(const codesign::ModelShape& model, const codesign::DeviceSpec& device,
                     const CommModel& comm, const Layout& layout);
EndsCost ends_cost(const codesign::ModelShape& model, const codesign::DeviceSpec& device,
                   const CommModel& comm, const Layout& layout);

/// The runtime's element type for the model's dtype (collective sizes and table lookup).
DType comm_dtype(codesign::DType d);

}  // namespace mcr::plan::detail
