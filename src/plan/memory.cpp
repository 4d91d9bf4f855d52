// Memory per GPU: model states per the ZeRO paper (Rajbhandari et al. 2020: 2 + 2 + K bytes per
// parameter with mixed-precision Adam, K = 12, sharded over data-parallel ranks by stage), or as
// Megatron's distributed optimizer keeps them (the gradient buffer whole, the optimizer state
// sharded over the data- and context-parallel ranks), and activations per Korthikanti et al. 2022
// (Table 2), generalised to GQA, head dims other than h/a, SwiGLU, any dtype, context parallelism,
// experts and FP8.
#include <algorithm>
#include <cmath>

#include "mcr/codesign/calculators.hpp"
#include "mcr/plan/planner.hpp"
#include "stage_cost.hpp"

namespace mcr::plan {

namespace {
double as_double(std::int64_t v) {
  return static_cast<double>(v);
}

/// Parameters of one layer's MLP of width ff, biases included as codesign::count_parameters counts
/// them (an expert's biases live on the expert's ranks, as its weights do).
double mlp_params(const codesign::ModelShape& m, double ff) {
  const double h = as_double(m.h);
  const double biases = m.linear_bias ? (m.gated_mlp() ? 2.0 : 1.0) * ff + h : 0.0;
  return (m.gated_mlp() ? 3.0 : 2.0) * h * ff + biases;
}

/// Bytes of one layer's activations kept for the backward pass, one microbatch, one rank. Kept
/// whole on every TP rank unless sequence parallel: two norm inputs, the QKV and MLP inputs and
/// two dropout masks (1 byte). Split over TP: Q, K and V, the projection input, the MLP
/// intermediates (GeLU: its input and output; SwiGLU: gate, up and product). Unfused attention
/// also keeps softmax output, dropout mask and dropout output per score. Under FP8 the inputs of
/// the linear layers are kept in FP8 (1 byte). MoE layers keep the routed copies and the experts'
/// intermediates instead of the MLP's.
double layer_activations(const codesign::ModelShape& m, const Layout& l, bool moe_layer,
                         bool keep_scores) {
  const double e = codesign::dtype_bytes(m.dtype);
  const double in = l.fp8 != Fp8::none ? 1.0 : e;  // a linear layer's saved input
  const double t = l.tp;
  const double sp_div = l.sequence_parallel ? t : 1.0;
  const double h = as_double(m.h);
  const double tokens = as_double(m.s) * as_double(m.b) / l.cp;
  const double sbh = tokens * h;
  const double kv = m.is_mla() ? as_double(m.a) : as_double(m.kv_heads());
  const double q_width = as_double(m.a) * as_double(m.qk_head_dim());
  const double kv_width = kv * as_double(m.qk_head_dim() + m.v_dim());
  const double attn_out = as_double(m.a) * as_double(m.v_dim());
  const double attention = (e * (q_width + kv_width) + in * attn_out) / h;
  // Recomputing the norms keeps their inputs only, not the outputs the QKV and MLP GEMMs read.
  const double replicated = 2 * e + (l.recomputes("layernorm") ? 0.0 : 2 * in) + 2;
  double bytes = sbh * (replicated / sp_div + attention / t);
  if (keep_scores) {
    bytes += sbh * (2 * e + 1) * as_double(m.a) * as_double(m.s) / h / t;
  }
  const double ff_elems = m.gated_mlp() ? 2 * e + in : e + in;  // per intermediate element
  // Recomputing the experts' activation keeps its inputs only, not the output the down GEMM reads.
  const double expert_elems = ff_elems - (l.recomputes("moe_act") ? in : 0.0);
  if (!moe_layer) {
    bytes += tokens * as_double(m.d_ff) / t * ff_elems;
    return bytes;
  }
  const int etp = l.expert_tp();
  const double cap = l.capacity_factor > 0 ? l.capacity_factor : 1.0;
  // The rank's own routed copies (R = T/t·k, times the capacity): what its unpermute buffer holds
  // once the combine has brought them back (after the expert-TP reduce-scatter).
  const double own_copies = tokens / t * as_double(m.top_k) * cap;
  const double copies = own_copies * etp;         // balanced: what this rank's experts receive
  bytes += copies * h * in + own_copies * h * e;  // expert inputs, unpermute buffer
  bytes += copies * as_double(m.expert_width()) / etp * expert_elems;
  if (m.d_ff_shared > 0) bytes += tokens * as_double(m.d_ff_shared) / t * ff_elems;
  return bytes;
}

/// One rank's share of the parameters: the dense ones split over TP and PP (the embeddings on the
/// end stages), the experts' over PP, expert TP and EP.
struct ParamSplit {
  codesign::ParamCount counts;  ///< the whole model's, TP 1
  double experts_total = 0;     ///< every expert of every MoE layer
  double dense_total = 0;       ///< the layers' parameters that are not experts'
  double dense_layers = 0;      ///< the dense layers' parameters on one rank of a stage
  double expert_layers = 0;     ///< the experts' parameters on one rank of a stage
  double first = 0;             ///< dense parameters on a rank of the first stage
  double last = 0;              ///< dense parameters on a rank of the last stage
};

ParamSplit split_params(const codesign::ModelShape& model, const Layout& l) {
  codesign::ModelShape whole = model;
  whole.t = 1;
  ParamSplit s;
  s.counts = codesign::count_parameters(whole);
  const auto& pc = s.counts;
  const double moe_layers = model.is_moe() ? as_double(model.L - model.dense_layers) : 0.0;
  s.experts_total =
      moe_layers * as_double(model.experts) * mlp_params(model, as_double(model.expert_width()));
  s.dense_total = pc.attention + pc.mlp + pc.router + pc.norm - s.experts_total;
  const double t = l.tp;
  s.dense_layers = s.dense_total / l.pp / t;
  s.expert_layers = s.experts_total / l.pp / (l.expert_tp() * l.ep);
  const double vh = as_double(model.v) * as_double(model.h) / t;
  const double in_emb = vh + pc.position;  // the position table is replicated over TP ranks
  const double out_emb = model.tied_embeddings ? (l.pp > 1 ? vh : 0.0) : vh;
  s.first = s.dense_layers + in_emb + (l.pp == 1 ? out_emb : 0.0);
  s.last = s.dense_layers + out_emb;
  return s;
}

}  // namespace

namespace detail {

StageParams stage_params(const codesign::ModelShape& model, const Layout& l) {
  const ParamSplit s = split_params(model, l);
  return {std::max(s.first, s.last), s.expert_layers};
}

}  // namespace detail

MemoryBreakdown plan_memory(const codesign::ModelShape& model, const codesign::DeviceSpec& device,
                            const Layout& l, const PlanOptions& options) {
  codesign::ModelShape m = model;
  m.t = l.tp;
  m.b = l.micro_batch;
  const ParamSplit split = split_params(m, l);
  const auto& pc = split.counts;
  const double t = l.tp;
  const double moe_layers = m.is_moe() ? as_double(m.L - m.dense_layers) : 0.0;
  const double experts_total = split.experts_total;
  const double dense_total = split.dense_total;
  const double dense_layers = split.dense_layers;
  const double expert_layers = split.expert_layers;
  const double first = split.first;
  const double last = split.last;

  const double e = codesign::dtype_bytes(m.dtype);
  const double grad = detail::gradient_bytes(options, m.dtype);
  const bool shard_states = l.zero >= 1 || l.distributed_optimizer;
  const auto states = [&](double dense, MemoryBreakdown& r) {
    const double all = dense + expert_layers;
    const double dense_dp = l.dense_replicas();
    const double expert_dp = std::max(1, l.expert_replicas());
    // Each part is sharded over the ranks that hold a copy of it: the dense parameters over
    // their data-parallel replicas, the experts' over their own (fewer, under expert parallelism).
    const double sharded = dense / dense_dp + expert_layers / expert_dp;
    r.weights = e * (l.zero >= 3 ? sharded : all);
    r.gradients = grad * (l.zero >= 2 ? sharded : all);
    r.optimizer = options.optimizer_bytes_per_param * (shard_states ? sharded : all);
  };

  // Layers of the stage by kind; the MoE ones keep their routed tokens instead of an MLP's.
  const bool keep_scores = m.attention == codesign::AttentionImpl::unfused &&
                           l.recompute != Recompute::full && !l.recomputes("core_attn");
  const double per_stage_layers = as_double(m.L) / l.pp;
  const double moe_share = m.L > 0 ? moe_layers / as_double(m.L) : 0.0;
  const double sp_div = l.sequence_parallel ? t : 1.0;
  const double sbh = as_double(m.s) * as_double(m.b) * as_double(m.h) / l.cp;
  const bool unfused = m.attention == codesign::AttentionImpl::unfused;
  const double full_layer = (1 - moe_share) * layer_activations(m, l, false, unfused) +
                            moe_share * layer_activations(m, l, true, unfused);
  double layer = (1 - moe_share) * layer_activations(m, l, false, keep_scores) +
                 moe_share * layer_activations(m, l, true, keep_scores);
  if (l.recompute == Recompute::full) layer = sbh * e / sp_div;  // the layer input only

  // 1F1B: the first stage holds min(m, p) microbatches of its L/p layers; interleaving adds
  // (p - 1) / (p v) of that (Korthikanti et al. 2022, sec. 4.2.3). The last stage holds one.
  const double in_flight = std::min<double>(as_double(l.microbatches()), l.pp);
  double factor = 1.0;
  if (l.interleave > 1) factor += (l.pp - 1.0) / (l.pp * static_cast<double>(l.interleave));
  double first_act = layer * per_stage_layers * in_flight * factor;
  double last_act = layer * per_stage_layers;
  if (l.recompute == Recompute::full) {  // one layer recomputed in full during its backward pass
    first_act += full_layer;
    last_act += full_layer;
  }
  // Logits (dtype) and their fp32 copy for the loss, on the last stage.
  const double logits = as_double(m.s) / l.cp * as_double(m.b) * as_double(m.v) / t * (e + 4);
  const double first_buf = l.pp == 1 ? logits : 0.0;
  const double last_buf = logits;
  const double per_layer =
      (dense_total + experts_total / (l.expert_tp() * l.ep) * t) / as_double(m.L);
  const double zero3 = l.zero >= 3 ? 2 * per_layer / t * e : 0.0;  // current + prefetched layer
  // FP8: every linear layer's weight also lives as FP8 and transposed FP8 (2 bytes), cached for the
  // step; with FP8 parameters those are the weights (1 byte less than e for each).
  const double linear_share =
      pc.total > 0 ? (pc.attention + pc.mlp) / (dense_total + experts_total) : 0.0;
  const auto fp8_copies = [&](double params) {
    if (l.fp8 == Fp8::none) return 0.0;
    const double linear = std::min(1.0, linear_share) * params;
    return l.fp8_params ? linear * (2.0 - e) : 2.0 * linear;
  };
  MemoryBreakdown r_first, r_last;
  states(first, r_first);
  states(last, r_last);
  r_first.activations = first_act;
  r_first.buffers = first_buf + zero3 + fp8_copies(dense_layers + expert_layers);
  r_last.activations = last_act;
  r_last.buffers = last_buf + zero3 + fp8_copies(dense_layers + expert_layers);
  for (auto* x : {&r_first, &r_last}) {
    x->total = x->weights + x->gradients + x->optimizer + x->activations + x->buffers;
  }
  MemoryBreakdown r = r_first.total >= r_last.total ? r_first : r_last;
  // Catalog capacities are marketed in GB but are binary (an "80GB" A100 has 80 GiB).
  r.capacity = device.memory_gb * std::pow(2.0, 30);
  r.fits = r.capacity <= 0 || r.total <= r.capacity;
  return r;
}

}  // namespace mcr::plan
