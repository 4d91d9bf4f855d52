#include "mcr/codesign/calculators.hpp"

#include <fmt/core.h>

#include <algorithm>

#include "mcr/codesign/analysis.hpp"
#include "mcr/errors.hpp"

namespace mcr::codesign {
namespace {

double dbl(std::int64_t x) {
  return static_cast<double>(x);
}
std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

void validate_layout(const ModelShape& m, const ParallelLayout& p) {
  if (p.pp <= 0) throw InvalidArgument(fmt::format("layout.pp = {} must be >= 1", p.pp));
  // A stage holds whole layers: more stages than layers leave some empty, which the per-stage
  // weights (divided by pp) and activations (ceil(L / pp) layers) would both misprice.
  if (p.pp > m.L) {
    throw InvalidArgument(fmt::format(
        "layout.pp = {} exceeds the model's {} layers (model.layers): every stage needs a layer",
        p.pp, m.L));
  }
  if (p.dp <= 0) throw InvalidArgument(fmt::format("layout.dp = {} must be >= 1", p.dp));
  if (p.zero_stage < 0 || p.zero_stage > 3) {
    throw InvalidArgument(fmt::format("layout.zero_stage = {} must be 0, 1, 2 or 3", p.zero_stage));
  }
  if (p.generated_tokens < 0) {
    throw InvalidArgument(
        fmt::format("layout.generated_tokens = {} must be >= 0", p.generated_tokens));
  }
}

// Activation bytes of one layer for one microbatch, 16-bit activations (Korthikanti et al. 2022,
// "Reducing Activation Recomputation in Large Transformer Models", eq. 2 and Table 2), generalized:
// the split part counts Q (2), K and V (2r each, r = a_kv/a), the projection input (2) (each at
// its width where head_dim or latent attention sets it) and the MLP
// intermediates (GeLU: up output and GeLU output, 2 x 2 d_ff/h; SwiGLU: gate, up, SiLU and product,
// 4 x 2 d_ff/h); unfused attention adds the s x s scores, softmax and dropout mask (5 a s / h). At
// MHA, GeLU, d_ff = 4h this is exactly the paper's sbh(10 + 24/t + 5as/(ht)).
// An MoE layer keeps each token's top_k routed copies instead: the experts' inputs (2 k, whole on
// every TP rank, as the experts of expert TP = t each receive them), the unpermute buffer (2 k,
// split) and the experts' and shared experts' intermediates at their widths.
double layer_activation_bytes(const ModelShape& m, bool sequence_parallel) {
  const double t = dbl(m.t);
  // Q, K, V and the projection input at their widths: a x qk_head_dim for Q, KV heads x
  // (qk_head_dim + v_dim) for K and V, a x v_dim for the projection's input. Latent attention's
  // per-head K and V come out of the up-projection for every head (its latents are not counted).
  // Without head_dim or latents this is 4 + 4 a_kv/a.
  const double kv_heads = m.is_mla() ? dbl(m.a) : dbl(m.kv_heads());
  const double attention_width = dbl(m.a) * dbl(m.qk_head_dim()) +
                                 kv_heads * dbl(m.qk_head_dim() + m.v_dim()) +
                                 dbl(m.a) * dbl(m.v_dim());
  const double per_width = (m.gated_mlp() ? 8.0 : 4.0) / dbl(m.h);  // MLP intermediates per d_ff
  double split = 2.0 * attention_width / dbl(m.h);
  if (m.attention == AttentionImpl::unfused) split += 5.0 * dbl(m.a) * dbl(m.s) / dbl(m.h);
  const double replicated = 10.0;  // two norm inputs (4), attention and MLP inputs (4), 2 masks
  double whole = sequence_parallel ? replicated / t : replicated;
  if (m.is_moe()) {
    const double k = dbl(m.top_k);
    split += per_width * (k * dbl(m.expert_width()) + dbl(m.d_ff_shared)) + 2.0 * k;
    whole += 2.0 * k;
  } else {
    split += per_width * dbl(m.d_ff);
  }
  return dbl(m.s) * dbl(m.b) * dbl(m.h) * (whole + split / t);
}

// One layer's activations averaged over the model's layers (the leading dense layers of an MoE
// model, DeepSeek's first_k_dense_replace, weighed in): what L layers hold, divided by L.
double mean_layer_activation_bytes(const ModelShape& m, bool sequence_parallel) {
  const double moe = layer_activation_bytes(m, sequence_parallel);
  if (m.dense_layers == 0) return moe;
  const double dense_share = dbl(m.dense_layers) / dbl(m.L);
  return dense_share * layer_activation_bytes(dense_layer_of(m), sequence_parallel) +
         (1 - dense_share) * moe;
}

// The largest layer's: what one layer being recomputed, or run for inference, needs at once.
double largest_layer_activation_bytes(const ModelShape& m, bool sequence_parallel) {
  const double moe = layer_activation_bytes(m, sequence_parallel);
  if (m.dense_layers == 0) return moe;
  return std::max(moe, layer_activation_bytes(dense_layer_of(m), sequence_parallel));
}

// Multi-head latent attention (DeepSeek-V2 sec. 2.1): Q from h directly or through a q_lora_rank
// latent with its norm; a shared down-projection to the KV latent plus the rotary key, the latent's
// norm, the per-head up-projection to the non-rotary key and the value, and the output projection
// from a x v_head_dim.
double latent_attention_params(const ModelShape& m) {
  const double h = dbl(m.h), a = dbl(m.a);
  const double q_width = a * dbl(m.qk_head_dim());
  const double q = m.q_lora_rank > 0
                       ? h * dbl(m.q_lora_rank) + dbl(m.q_lora_rank) + dbl(m.q_lora_rank) * q_width
                       : h * q_width;
  const double kv = h * dbl(m.kv_lora_rank + m.qk_rope_dim) + dbl(m.kv_lora_rank) +
                    dbl(m.kv_lora_rank) * a * dbl(m.qk_nope_dim + m.v_head_dim);
  const double out = a * dbl(m.v_head_dim) * h;
  return q + kv + out;
}

}  // namespace

ParamCount count_parameters(const ModelShape& m) {
  m.validate();
  ParamCount p;
  const double h = dbl(m.h);
  const double q = dbl(m.a * m.head_dim());  // Q and O width: h unless head_dim is given
  const double kv = dbl(m.kv_heads() * m.head_dim());
  const double layers = dbl(m.L);
  const bool bias = m.linear_bias;
  p.embedding = dbl(m.v) * h * (m.tied_embeddings ? 1.0 : 2.0);
  p.position =
      m.position == PositionEmbedding::learned ? dbl(m.positions > 0 ? m.positions : m.s) * h : 0.0;
  // Q is h x q, K and V are h x kv, O is q x h; biases on all four, or on Q, K and V only.
  double attention = 2.0 * h * q + 2.0 * h * kv;
  if (bias) {
    attention += q + 2.0 * kv + h;
  } else if (m.qkv_bias) {
    attention += q + 2.0 * kv;
  }
  if (m.is_mla()) attention = latent_attention_params(m);
  if (m.qk_norm) attention += 2.0 * dbl(m.qk_head_dim());  // one weight per head dim, Q and K
  if (m.attention_sinks) attention += dbl(m.a);            // one logit per head
  p.attention = layers * attention;
  // A gated MLP (SwiGLU, GeGLU) has gate, up and down matrices; a plain one up and down.
  const auto mlp_params = [&](double ff) {
    return m.gated_mlp() ? 3.0 * h * ff + (bias ? 2.0 * ff + h : 0.0)
                         : 2.0 * h * ff + (bias ? ff + h : 0.0);
  };
  const double dense_mlp = mlp_params(dbl(m.d_ff));
  const double expert = mlp_params(dbl(m.expert_width()));
  const double shared = m.d_ff_shared > 0 ? mlp_params(dbl(m.d_ff_shared)) : 0.0;
  const double moe_layers = m.is_moe() ? dbl(m.L - m.dense_layers) : 0.0;
  const double dense_layers = layers - moe_layers;
  p.mlp = dense_layers * dense_mlp + moe_layers * (expert * dbl(m.experts) + shared);
  p.router = moe_layers * (h + (bias ? 1.0 : 0.0)) * dbl(m.experts);
  const double one_norm = m.norm == NormType::layernorm ? 2.0 * h : h;
  p.norm = (dbl(m.norms_per_layer) * layers + 1.0) * one_norm;
  p.total = p.embedding + p.position + p.attention + p.mlp + p.router + p.norm;
  p.active = p.total - moe_layers * expert * dbl(m.experts - m.top_k);
  p.non_embedding = p.total - p.embedding - p.position;
  return p;
}

FlopCount count_flops(const ModelShape& model) {
  ModelShape whole = model;
  whole.t = 1;  // the whole model's FLOPs, not one TP rank's share
  // Every kind of layer by its count: leading dense layers of an MoE model run the dense MLP, not
  // the experts; sliding-window layers attend to the window only.
  double layers = 0;
  for (const LayerGroup& group : layer_groups(whole)) {
    // The routed experts' GEMMs give every expert the busiest one's tokens (that sets the time);
    // the FLOPs are those of the b*s*top_k routed copies, each through one expert.
    const double copies = dbl(group.shape.b * group.shape.s * group.shape.top_k);
    double one = 0;
    for (const Gemm& g : layer_gemms(group.shape, false, group.span)) {
      const bool routed = g.role == "moe_gate" || g.role == "moe_up" || g.role == "moe_down";
      one += routed ? g.flops() * copies / (dbl(g.m) * dbl(g.batch)) : g.flops();
    }
    layers += dbl(group.count) * one;
  }
  double logits = 0;
  for (const Gemm& g : logit_gemms(whole, false))
    logits += g.flops();
  FlopCount f;
  f.forward_per_step = layers + logits;
  f.forward_per_token = f.forward_per_step / dbl(whole.b * whole.s);
  f.training_per_step = 3.0 * f.forward_per_step;
  // Recomputation runs the layers' forward pass again, not the logits' (Megatron's
  // 96·B·s·L·h²·(1 + s/6h + v/16Lh) counts the logits three times).
  f.training_recompute_per_step = 4.0 * layers + 3.0 * logits;
  return f;
}

double training_flops(const ModelShape& model, double tokens, bool recompute) {
  if (!(tokens > 0)) throw InvalidArgument(fmt::format("tokens = {} must be > 0", tokens));
  const FlopCount f = count_flops(model);
  const double per_step = recompute ? f.training_recompute_per_step : f.training_per_step;
  return per_step / dbl(model.b * model.s) * tokens;
}

MemoryEstimate training_memory(const ModelShape& model, const ParallelLayout& layout) {
  model.validate();
  validate_layout(model, layout);
  const double params = count_parameters(model).total;
  // Every model-state term is sharded by t * pp first; ZeRO then shards over dp.
  const double shard = params / dbl(model.t * layout.pp);
  const double dp = dbl(layout.dp);
  MemoryEstimate e;
  e.weights = shard * layout.weight_bytes / (layout.zero_stage >= 3 ? dp : 1.0);
  e.gradients = shard * layout.grad_bytes / (layout.zero_stage >= 2 ? dp : 1.0);
  e.optimizer = shard * layout.optimizer_bytes / (layout.zero_stage >= 1 ? dp : 1.0);
  // With 1F1B pipelining the first stage holds pp microbatches of its L/pp layers: about L layers.
  const double layers_held = dbl(ceil_div(model.L, layout.pp)) * dbl(layout.pp);
  if (layout.checkpoint_activations) {
    const double layer_input =
        2.0 * dbl(model.s * model.b * model.h) / (layout.sequence_parallel ? dbl(model.t) : 1.0);
    // + one layer being recomputed, the largest
    e.activations =
        layers_held * layer_input + largest_layer_activation_bytes(model, layout.sequence_parallel);
  } else {
    e.activations = layers_held * mean_layer_activation_bytes(model, layout.sequence_parallel);
  }
  e.total = e.weights + e.gradients + e.optimizer + e.activations;
  return e;
}

MemoryEstimate inference_memory(const ModelShape& model, const ParallelLayout& layout) {
  model.validate();
  validate_layout(model, layout);
  const double params = count_parameters(model).total;
  MemoryEstimate e;
  e.weights = params / dbl(model.t * layout.pp) * layout.weight_bytes;
  e.activations = largest_layer_activation_bytes(model, layout.sequence_parallel);
  // Per token and layer: K and V of the rank's key/value heads (replicated when a_kv < t), or under
  // latent attention the compressed latent and the shared rotary key that inference engines cache
  // in its place (DeepSeek-V2 §2.1.2), whole on every tensor-parallel rank.
  const double per_token = model.is_mla() ? dbl(model.kv_lora_rank + model.qk_rope_dim)
                                          : dbl(ceil_div(model.kv_heads(), model.t)) *
                                                dbl(model.qk_head_dim() + model.v_dim());
  e.kv_cache = dbl(ceil_div(model.L, layout.pp)) * dbl(model.b) *
               dbl(model.s + layout.generated_tokens) * per_token * dtype_bytes(model.dtype);
  e.total = e.weights + e.activations + e.kv_cache;
  return e;
}

}  // namespace mcr::codesign
