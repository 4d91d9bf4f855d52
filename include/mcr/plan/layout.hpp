// A parallel training layout (Megatron-style tensor, pipeline and data parallelism, plus ZeRO), and
// the rules that decide whether it can exist for a model on a system.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mcr/codesign/model.hpp"
#include "mcr/plan/system.hpp"

namespace mcr::plan {

/// none: keep every activation; selective: recompute the attention core (Korthikanti et al. 2022);
/// full: keep only each layer's input and rerun its forward pass in the backward pass.
enum class Recompute { none, selective, full };
std::string to_string(Recompute r);
Recompute parse_recompute(const std::string& s);  ///< none | selective | full

/// FP8 as Transformer Engine runs it: the linear layers' forward, dgrad and wgrad GEMMs in FP8 with
/// their operands cast (and transposed) by memory-bound kernels; attention, the logits and the
/// router stay in the model's dtype. delayed: scales from the amax history (no extra pass);
/// current: per-tensor scales of the tensor itself (one more read of each input before its cast);
/// blockwise (1x128 activations, 128x128 weights) and mxfp8 (Blackwell's 32-element blocks): block
/// scales computed in the cast kernel.
enum class Fp8 { none, delayed, current, blockwise, mxfp8 };
std::string to_string(Fp8 f);
Fp8 parse_fp8(const std::string& s);  ///< none | delayed | current | blockwise | mxfp8

/// How MoE tokens reach their experts. alltoall: Megatron-Core's all_to_all dispatcher, one copy
/// per routed expert over whatever link joins the ranks. flex: the DeepEP / HybridEP dispatcher,
/// which sends a token once to each remote node holding any of its experts and forwards it inside
/// the node over NVLink.
enum class Dispatcher { alltoall, flex };
std::string to_string(Dispatcher d);
Dispatcher parse_dispatcher(const std::string& s);  ///< alltoall | flex

struct Layout {
  int gpus = 0;  ///< 0: tp * cp * pp * dp, or the whole system when dp is 0 too
  int tp = 1;
  int pp = 1;
  int dp = 0;  ///< 0: gpus / (tp * cp * pp)
  /// Context parallelism (Megatron-Core ring attention): each of cp ranks holds s/cp tokens of
  /// every sequence (two load-balanced chunks) and passes K and V around the ring.
  int cp = 1;
  /// Expert parallelism: the routed experts are spread over ep ranks of the tp*cp*dp ranks that
  /// share a pipeline stage; tokens reach them by all_to_all.
  int ep = 1;
  int etp = 0;                 ///< expert tensor parallelism; 0: tp (Megatron-Core's default)
  double capacity_factor = 0;  ///< tokens an expert processes over the balanced share; 0: dropless
  Dispatcher moe_dispatcher = Dispatcher::alltoall;
  Fp8 fp8 = Fp8::none;      ///< FP8 recipe of the linear layers
  bool fp8_params = false;  ///< weights kept in FP8 (no per-step weight cast, FP8 gathers)
  /// Megatron's distributed optimizer: gradients reduce-scattered and parameters all-gathered over
  /// the data-parallel ranks (with those of cp), each bucket overlapped with the backward and the
  /// next forward pass; optimizer state sharded.
  bool distributed_optimizer = false;
  bool tp_comm_overlap = false;  ///< TP/SP collectives pipelined with their GEMMs (userbuffers)
  bool pp_comm_overlap = false;  ///< pipeline sends and receives overlapped with compute
  /// Megatron-Core's uneven pipeline splits (a pipeline layout, or the embedding and the loss
  /// accounted for in the split): layers need not divide pp * interleave; each stage is priced at
  /// L / pp layers.
  bool uneven_pipeline = false;
  std::int64_t micro_batch = 1;
  std::int64_t global_batch = 0;  ///< sequences per step; 0: micro_batch * dp (one microbatch)
  int interleave = 1;             ///< model chunks per pipeline stage (interleaved 1F1B)
  Recompute recompute = Recompute::none;
  /// What selective recomputation reruns (Megatron-Core's recompute_modules): core_attn (the
  /// attention kernels; the default), layernorm (the norms, whose outputs are then not kept),
  /// moe_act (the experts' activation, whose output is not kept).
  std::vector<std::string> recompute_modules;
  bool recomputes(const std::string& module) const;
  bool sequence_parallel = false;
  int zero = 0;  ///< 0..3: shard optimizer (1), + gradients (2), + weights (3)
  bool allow_tp_across_nodes = false;  ///< a TP group larger than a node is legal but slow
  bool dp_overlap = true;  ///< overlap the gradient reduction with the last backward pass

  /// Microbatches per pipeline per step: global_batch / (micro_batch * dp).
  std::int64_t microbatches() const;
  int expert_tp() const { return etp > 0 ? etp : tp; }
  /// Ranks holding the same dense weights: dp * cp (they reduce the gradients together).
  int dense_replicas() const { return dp * cp; }
  /// Ranks holding the same experts: tp * cp * dp / (etp * ep).
  int expert_replicas() const;
  friend bool operator==(const Layout&, const Layout&) = default;
};

/// Fills gpus, dp and global_batch where they are 0, then checks every rule. Throws
/// mcr::InvalidArgument naming the fields, the values and the rule, e.g. "layout.tp 8 x layout.pp 4
/// x layout.dp 3 = 96 GPUs, but layout.gpus is 64: tp*pp*dp must equal gpus".
Layout resolve_layout(Layout layout, const codesign::ModelShape& model, const SystemSpec& system);

/// The same checks without throwing: empty when valid, else the first broken rule.
std::string layout_error(const Layout& resolved, const codesign::ModelShape& model,
                         const SystemSpec& system);

/// "tp=8 pp=8 dp=1 mb=1 gbs=64 v=3 recompute=selective sp zero=0", plus cp, ep, fp8 and the
/// distributed optimizer where they apply.
std::string describe(const Layout& layout);

}  // namespace mcr::plan
