// Internal: the per-microbatch cost of one transformer layer and of the model's ends (embedding,
// logits) on one GPU, from the codesign GEMM model and the bytes the memory-bound kernels move.
#pragma once

#include <string>
#include <vector>

#include "mcr/codesign/device.hpp"
#include "mcr/codesign/gemm.hpp"
#include "mcr/codesign/model.hpp"
#include "mcr/plan/comm_model.hpp"
#include "mcr/plan/layout.hpp"
#include "mcr/plan/planner.hpp"

namespace mcr::plan::detail {

/// What every part of a layer's cost needs. `model` has t = tp and b = micro_batch; `device` has
/// the system's compute efficiency applied, `fp8_device` also the system's FP8 efficiency.
struct Context {
  const codesign::ModelShape& model;
  const codesign::DeviceSpec& device;
  const codesign::DeviceSpec& fp8_device;
  const CommModel& comm;
  const Layout& layout;
  const PlanOptions& options;

  /// Tokens of one microbatch on one rank before any sequence-parallel split: b * s / cp.
  double tokens() const;
  /// Bytes per element of the model dtype.
  double elem() const;
  bool fp8() const { return layout.fp8 != Fp8::none; }
};

/// Seconds per microbatch for one layer on one GPU (averaged over the model's kinds of layers:
/// full or sliding attention, dense or MoE MLP).
struct LayerCost {
  double fwd_gemm = 0;
  double bwd_gemm = 0;
  double attn_core_fwd = 0;  ///< forward attention kernels (what selective recomputation repeats)
  double fwd_mem = 0;        ///< memory-bound kernels, forward
  double bwd_mem = 0;
  double attn_mem_fwd = 0;  ///< softmax + attention dropout, forward (unfused only)
  double norm_fwd = 0;      ///< the layer's norms, forward (what recomputing layernorm repeats)
  double moe_act_fwd = 0;   ///< the experts' activation, forward (recomputing moe_act repeats it)
  double fp8_fwd = 0;       ///< FP8 casts of the forward pass (with the weights' share)
  double fp8_bwd = 0;       ///< FP8 casts of the output gradients
  double tp_fwd = 0;        ///< TP/SP collectives of the forward pass, exposed
  double tp_bwd = 0;
  double cp_fwd = 0;  ///< ring-attention exchange of the forward pass, exposed
  double cp_bwd = 0;
  double ep_fwd = 0;  ///< expert all_to_all of the forward pass (and expert-TP gathers)
  double ep_bwd = 0;
  double fwd_flops = 0;  ///< GEMM FLOPs of the forward pass on this GPU (attention in full)
  double attn_core_flops = 0;
  double causal_saving_flops = 0;  ///< forward attention FLOPs causal masking skips, this GPU
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

/// Whether a GEMM role is a linear layer (a weight times activations): those run in FP8 under an
/// FP8 recipe. Attention, the logits and the router do not.
bool is_linear(const std::string& role);

/// Time of one GEMM: linear layers in FP8 on the FP8 device when the recipe says so.
double gemm_time(const codesign::Gemm& g, const Context& c);

/// A forward GEMM and, when `training`, its dgrad and wgrad (as codesign::layer_gemms lists them).
void add_gemm(std::vector<codesign::Gemm>& out, const char* role, std::int64_t m, std::int64_t n,
              std::int64_t k, std::int64_t batch, codesign::DType dtype);

LayerCost layer_cost(const Context& c);
EndsCost ends_cost(const Context& c);

/// Flash attention of one layer whose queries see `span` keys: the kernels (causal masking, the
/// ring of context parallelism) and the exposed part of the K/V exchange. Adds to `cost`.
void add_attention(const Context& c, const codesign::ModelShape& shape, std::int64_t span,
                   LayerCost& cost);

/// The mixture-of-experts block of one layer: router, routed experts at the tokens each local
/// expert receives, shared experts, permutation, all_to_all dispatch and combine. Adds to `cost`;
/// the linear GEMMs it times are appended to `linear` (for the FP8 cast accounting).
/// Returns the shared experts' GEMM time, forward and backward: of the block's GEMMs only these
/// run tensor-parallel beside the TP collectives that overlap can hide behind them.
struct SharedExpertTime {
  double fwd = 0, bwd = 0;
};
SharedExpertTime add_moe(const Context& c, const codesign::ModelShape& shape, LayerCost& cost,
                         std::vector<codesign::Gemm>& linear);

/// The routed tokens of one MoE layer on one rank, per microbatch, under balanced routing.
struct MoeTokens {
  double own = 0;          ///< the rank's own tokens, those its router scores: b*s/cp/tp
  double own_copies = 0;   ///< their routed copies (k each, times the capacity factor)
  double expert_rows = 0;  ///< rows the rank's local experts process, all together
  /// EP ranks holding at least one of a token's k experts, on average: where the flex dispatcher
  /// sends it (a token whose experts share a rank travels there once).
  double ranks_per_token = 1;
  /// Rows the flex dispatcher delivers to the rank, one per token and destination rank, before
  /// they are permuted into expert order.
  double delivered = 0;
  std::int64_t local_experts = 1;    ///< experts / ep
  std::int64_t rows_per_expert = 1;  ///< the GEMMs' M: one expert's rows, padded for FP8
  bool fp8_pad_copy = false;         ///< Megatron-Core pads (and unpads) with a copy
};
MoeTokens moe_tokens(const Context& c, const codesign::ModelShape& shape);

/// The MoE block's memory-bound kernels (src/plan/moe_kernels.cpp): token permutation and
/// unpermutation, the all_to_all dispatcher's sort by local expert, the router's softmax and top-k,
/// the experts' activation, the experts' output biases and FP8 alignment padding. Adds to `cost`.
void add_moe_kernels(const Context& c, const codesign::ModelShape& shape, const MoeTokens& tokens,
                     LayerCost& cost);

/// Time of the local experts' GEMM `g` (g.batch = local experts) as Transformer Engine's grouped
/// linear layer runs it: one cuBLAS GEMM per expert, issued round-robin on its compute streams.
double grouped_gemm_time(const codesign::Gemm& g, const Context& c);

/// FP8 casts (and transposes) of the inputs of `forward` linear GEMMs and of their output
/// gradients, plus the weights' cast once per step spread over the microbatches.
void add_fp8_casts(const Context& c, const std::vector<codesign::Gemm>& forward, LayerCost& cost);

/// Exposed time of collectives worth `comm` seconds paired with GEMMs worth `gemm` seconds:
/// everything without overlap; with Transformer Engine's userbuffers, the first of tp chunks plus
/// whatever the GEMMs cannot cover.
double exposed_tp(double comm, double gemm, const Layout& layout);

/// The runtime's element type for the model's dtype (collective sizes and table lookup).
DType comm_dtype(codesign::DType d);

/// Bytes of one gradient element: --grad-dtype's (PlanOptions::grad_bytes_per_param) when given,
/// else the model dtype's.
double gradient_bytes(const PlanOptions& options, codesign::DType model);
/// The element type the gradients travel in: --grad-dtype's (PlanOptions::grad_dtype) when given;
/// else, from their bytes alone, fp32 at 4 bytes, the model's at its width, bf16 at 2 bytes of a
/// wider model.
DType gradient_comm_dtype(const PlanOptions& options, codesign::DType model);

/// "gloo, table:intra (tuning)" or "alpha-beta": where a collective's time came from.
std::string origin(const CommCost& c);

/// Parameters one rank holds on the more loaded of the first and last pipeline stage: those
/// replicated over the data- and context-parallel ranks (attention, dense MLPs, shared experts,
/// router, norms, embeddings; split over TP) and the routed experts' (split over EP and expert
/// TP, replicated over the expert-data-parallel ranks).
struct StageParams {
  double dense = 0;
  double expert = 0;
};
StageParams stage_params(const codesign::ModelShape& model, const Layout& layout);

/// The step's data-parallel traffic and what of it is exposed (src/plan/data_parallel.cpp).
struct DataParallel {
  double exposed = 0;
  std::string source;                   ///< where the reduction's time came from
  std::vector<DpReduction> reductions;  ///< one per group of gradients, with its buckets
};
/// `fwd` and `bwd_window` are one microbatch's forward pass and backward pass (with its
/// recomputation) on the stage. The exposed part is the first pipeline stage's: it runs the step's
/// first forward pass and its last backward pass, so no pipeline fill or drain covers it.
DataParallel data_parallel(const Context& c, const StageParams& params, double fwd,
                           double bwd_window);

/// The plan's notes: sources of the collectives' times, the assumptions that applied, what the
/// memory leaves out (src/plan/notes.cpp). `r` has its breakdown and memory already.
void add_notes(PlanResult& r, const Context& ctx, const std::string& dp_source,
               const std::string& p2p_source);

}  // namespace mcr::plan::detail
