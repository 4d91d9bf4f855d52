// Step time, throughput and memory of one training layout: the GEMMs of every layer through the
// codesign tile/wave/alignment model, memory-bound kernels from the bytes they move, tensor- and
// sequence-parallel collectives, pipeline transfers and bubble (1F1B, interleaved), data-parallel
// gradient reduction with overlap, ZeRO stages, embedding, logits and the optimizer step.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcr/codesign/device.hpp"
#include "mcr/codesign/model.hpp"
#include "mcr/plan/comm_model.hpp"
#include "mcr/plan/layout.hpp"
#include "mcr/plan/system.hpp"

namespace mcr::plan {

/// Seconds per step, by cause; the parts add up to the step time. Compute parts are those of the
/// slowest pipeline stage, times the microbatches.
struct Breakdown {
  double forward_gemm = 0;      ///< layer GEMMs and attention BMMs, forward
  double backward_gemm = 0;     ///< dgrad and wgrad GEMMs and the attention backward
  double memory_bound = 0;      ///< norms, activations, softmax, dropout, residual adds
  double recompute = 0;         ///< forward work repeated in the backward pass
  double logits_embedding = 0;  ///< embedding lookup, logits GEMMs, cross entropy
  double tp_comm = 0;           ///< tensor/sequence-parallel collectives (exposed part)
  double cp_comm = 0;           ///< ring-attention K/V exchange not hidden by attention
  double ep_comm = 0;           ///< expert-parallel all_to_all dispatch and combine
  double fp8_casts = 0;         ///< FP8 casts and transposes of inputs, gradients, weights
  double pp_comm = 0;           ///< pipeline sends and receives
  double bubble = 0;            ///< pipeline fill and drain
  double dp_comm = 0;           ///< exposed gradient reduction / ZeRO gathers and embedding sync
  double optimizer = 0;         ///< Adam update of the local shard

  /// The sum of every term of breakdown_terms().
  double total() const;
};

/// One term of the step-time breakdown as every output reads it: a new term is a Breakdown field
/// and a row of breakdown_terms(), and the total, the JSON (`<key>_s`) and the text report follow.
struct BreakdownTerm {
  double Breakdown::*field;
  std::string_view key;    ///< JSON key without its "_s" unit
  std::string_view label;  ///< the text report's row
  /// Text report: whether the layout has this term at all (null: every layout), so that a term the
  /// layout has but hides completely still shows as 0.
  bool (*applies)(const Layout&);
};
/// Every term, in the order the outputs list them.
std::span<const BreakdownTerm> breakdown_terms() noexcept;

/// Bytes per GPU on the most loaded pipeline stage.
struct MemoryBreakdown {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
  double activations = 0;
  double buffers = 0;  ///< logits in fp32, ZeRO-3 gathered layers, FP8 weight copies
  double total = 0;
  double capacity = 0;  ///< the device's memory
  bool fits = true;
};

struct PlanOptions {
  /// Bytes per parameter of the optimizer state (Adam: fp32 master, momentum, variance = 12), as
  /// the K of the ZeRO paper.
  double optimizer_bytes_per_param = 12;
  /// Bytes per gradient bucket of the data-parallel reduction (PyTorch DDP's default
  /// bucket_cap_mb of 25 MB, and perf/train_step's); 0 = one reduction of every gradient.
  double dp_bucket_bytes = 25e6;
  /// Bytes per parameter of the gradient buffer and of its data-parallel reduction; 0: the model
  /// dtype's (Megatron-LM's bf16 default accumulates and reduces in fp32: 4).
  double grad_bytes_per_param = 0;
  /// The gradients' dtype when it is known (--grad-dtype): the element type their reduction is
  /// looked up under in a measured table and its rules. Unset: fp32 at 4 bytes, else the model's.
  std::optional<codesign::DType> grad_dtype;
  /// Decoder (causal) attention: fused attention kernels skip the masked half of the scores.
  bool causal = true;
  /// The experts' gated activation clamps its two halves first (gpt-oss: Megatron-Core's
  /// activation_func_clamp_value 7): two clamps and a concatenation before the fused kernel.
  bool moe_glu_clamp = false;
};

/// One group of gradients that the data-parallel reduction reduces on its own ranks.
struct DpReduction {
  std::string gradients;   ///< "dense" or "expert"
  std::string collective;  ///< "all_reduce" or "reduce_scatter"
  double bytes = 0;        ///< the group's gradients, in their width
  std::size_t buckets = 0;
  double last_bucket_bytes = 0;  ///< the remainder; the other buckets are full
};

struct PlanResult {
  codesign::ModelShape model;  ///< with t = tp and b = micro_batch
  Layout layout;
  std::string device;
  std::string system;
  double step_time_s = 0;
  double tokens_per_s = 0;
  double tokens_per_s_per_gpu = 0;  ///< tokens_per_s / gpus, as performance tables publish it
  /// Per step: 3 x forward (no recomputation), attention over all s x s scores: the convention of
  /// Megatron-LM's and NeMo's "model TFLOP/s".
  double model_flops = 0;
  /// The same with the scores of causal full-attention layers halved: what the kernels run.
  double model_flops_causal = 0;
  double hardware_flops = 0;  ///< per step, recomputation included (what Megatron reports)
  double tflops_per_gpu = 0;  ///< hardware_flops / step / gpus
  double model_tflops_per_gpu = 0;
  double mfu = 0;         ///< model_tflops_per_gpu / peak_tflops
  double mfu_causal = 0;  ///< model_flops_causal per second per GPU / peak_tflops
  double hfu = 0;         ///< tflops_per_gpu / dense peak
  /// Dense peak the utilisations divide by: the model dtype's, or FP8's when the linear layers run
  /// in FP8 (as NVIDIA's recipes state their MFU).
  double peak_tflops = 0;
  double bubble_fraction = 0;  ///< (p - 1) / (m * v): relative to compute (bubble_fraction())
  double params = 0;           ///< whole model
  Breakdown breakdown;
  /// The model's ends on the stage(s) that run them, per microbatch (parts of logits_embedding),
  /// so that a measurement can put the logits GEMMs with the other GEMMs.
  double embedding_s = 0, logits_gemm_s = 0, cross_entropy_s = 0;
  /// The data-parallel reduction as priced: the bucket size it was given (PlanOptions), how many
  /// buckets the gradients made in all (0 without data parallelism), and each group of gradients
  /// reduced on its own (the dense parameters', the experts') with its buckets.
  double dp_bucket_bytes = 0;
  std::size_t dp_buckets = 0;
  std::vector<DpReduction> dp_reductions;
  bool moe_glu_clamp = false;  ///< PlanOptions::moe_glu_clamp, as priced
  MemoryBreakdown memory;
  std::vector<std::string> notes;  ///< communication sources, assumptions that applied
};

/// Predicts one step. `layout` must be resolved (resolve_layout); the model's t and b are replaced
/// by the layout's tp and micro_batch. Throws mcr::InvalidArgument for a layout that cannot exist.
PlanResult plan_step(const codesign::ModelShape& model, const codesign::DeviceSpec& device,
                     const CommModel& comm, const Layout& layout, const PlanOptions& options = {});

/// The dtype whose peak MFU and HFU divide by: FP8's under an FP8 recipe (or a model of dtype fp8,
/// trained as bf16 with FP8 linear layers), else the model's.
codesign::DType peak_dtype(codesign::DType model, Fp8 recipe);

/// Memory alone (cheap; the search uses it to skip layouts that cannot fit).
MemoryBreakdown plan_memory(const codesign::ModelShape& model, const codesign::DeviceSpec& device,
                            const Layout& layout, const PlanOptions& options = {});

/// The gradient buckets of some bytes of gradients: `full` buckets of `size` bytes, then the
/// remainder `rest` (0: none). Counted, not listed: a tiny bucket size makes billions of them.
struct GradientBuckets {
  std::uint64_t full = 0;
  double size = 0;
  double rest = 0;
  std::uint64_t count() const noexcept { return full + (rest > 0 ? 1 : 0); }
  /// The last bucket's size (0 when there is none).
  double last() const noexcept { return rest > 0 ? rest : full > 0 ? size : 0; }
};
/// The buckets of `bytes` of gradients: as many full `bucket_bytes` buckets as fit, then the
/// remainder; one bucket of everything when `bucket_bytes` is 0 or larger.
GradientBuckets gradient_buckets(double bytes, double bucket_bytes);
/// The sum of one collective per bucket (each priced by comm.cost in `form`: the full buckets
/// once, times their count); the source of the last one.
CommCost bucketed_cost(const CommModel& comm, Collective op, double bytes, double bucket_bytes,
                       const Placement& where, DType dtype, CallForm form = CallForm::sync);

/// The pipeline bubble of a 1F1B step relative to its ideal (bubble-free) compute time:
/// (p - 1) / (m * v) (Narayanan et al. 2021). Not a share of the step: it exceeds 1 with fewer
/// microbatches than stages; the share of the step spent idle is b / (1 + b).
double bubble_fraction(int pp, std::int64_t microbatches, int interleave);

nlohmann::json to_json(const PlanResult& r);
/// The device's peak for `dtype` and where it comes from (catalog citation, CPU-facts estimate or
/// peak probe): {"dtype", "source", "tflops"} (null when the device does not run the dtype), so
/// that every plan says what its compute rate rests on.
nlohmann::json peak_to_json(const codesign::DeviceSpec& device, codesign::DType dtype);
/// to_json(r) with "device_peak": peak_to_json(device, dtype), as `mcr plan --json` prints it;
/// `dtype` is the model's, the peak shown that of peak_dtype(dtype, r.layout.fp8).
nlohmann::json to_json(const PlanResult& r, const codesign::DeviceSpec& device,
                       codesign::DType dtype);

}  // namespace mcr::plan
