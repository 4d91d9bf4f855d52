// Parameter, FLOP and memory calculators (the co-design cookbook's calculators, with its known bugs
// fixed: see docs/codesign.md "Calculators").
#pragma once

#include <cstdint>

#include "mcr/codesign/model.hpp"

namespace mcr::codesign {

struct ParamCount {
  double embedding = 0;  ///< token embedding, plus the output matrix when untied
  double position = 0;   ///< learned position embedding (s*h), 0 for rotary
  double attention = 0;  ///< Q, K, V, O weights (+ biases), all layers
  double mlp = 0;        ///< dense MLP or all experts, all layers
  double router = 0;     ///< MoE gate, all layers
  double norm = 0;       ///< per-layer norms and the final norm
  double total = 0;
  double active = 0;         ///< parameters used per token (top_k of the experts)
  double non_embedding = 0;  ///< total - embedding - position
};
ParamCount count_parameters(const ModelShape& model);

struct FlopCount {
  double forward_per_token = 0;            ///< whole model (all t GPUs of a TP group), one token
  double forward_per_step = 0;             ///< one microbatch of b*s tokens
  double training_per_step = 0;            ///< 3 x forward (forward, dgrad, wgrad)
  double training_recompute_per_step = 0;  ///< full activation recomputation: 4 x the layers'
                                           ///< forward, 3 x the logits' (not recomputed)
};
/// Summed from the GEMM list (so it agrees with the analysis) over the whole model (t GPUs): the
/// model's FLOPs, nothing replicated over tensor parallelism counted twice, the routed experts at
/// the b*s*top_k copies they receive (the GEMM list gives each the busiest expert's tokens).
FlopCount count_flops(const ModelShape& model);
/// Training FLOPs for `tokens` tokens.
double training_flops(const ModelShape& model, double tokens, bool recompute);

struct ParallelLayout {
  std::int64_t pp = 1;  ///< pipeline stages (layers split evenly)
  std::int64_t dp = 1;  ///< data-parallel replicas
  int zero_stage = 0;   ///< 0..3: optimizer (1), + gradients (2), + weights (3) sharded over dp
  bool checkpoint_activations = false;  ///< full recomputation: keep only each layer's input
  bool sequence_parallel = false;       ///< shard norm/dropout activations over t too
  double weight_bytes = 2;              ///< low-precision weights
  double grad_bytes = 4;                ///< gradient accumulation dtype
  double optimizer_bytes = 12;          ///< AdamW: fp32 master + momentum + variance
  std::int64_t generated_tokens = 0;    ///< inference: tokens generated after the prompt of s
};

struct MemoryEstimate {  ///< bytes per GPU
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
  double activations = 0;
  double kv_cache = 0;
  double total = 0;
};
/// Tensor parallelism comes from model.t. Weights, gradients and optimizer state are divided by
/// t*pp (and by dp per ZeRO stage); activations follow Korthikanti et al. 2022.
MemoryEstimate training_memory(const ModelShape& model, const ParallelLayout& layout);
/// Weights plus a KV cache of 2 (K and V) x L x b x (s + generated) x a_kv x (h/a) elements,
/// divided over t (KV heads) and pp (layers).
MemoryEstimate inference_memory(const ModelShape& model, const ParallelLayout& layout);

}  // namespace mcr::codesign
