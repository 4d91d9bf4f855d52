// Memory per GPU: model states per the ZeRO paper (Rajbhandari et al. 2020: 2 + 2 + K bytes per
// parameter with mixed-precision Adam, K = 12, sharded over data-parallel ranks by stage) and
// activations per Korthikanti et al. 2022 (Table 2), generalised to GQA, SwiGLU and any dtype.
#include <algorithm>
#include <cmath>

#include "mcr/codesign/calculators.hpp"
#include "mcr/plan/planner.hpp"

namespace mcr::plan {

namespace {
double as_double(std::int64_t v) {
  return static_cast<double>(v);
}
}  // namespace

MemoryBreakdown plan_memory(const codesign::ModelShape& model, const codesign::DeviceSpec& device,
                            const Layout& l, const PlanOptions& options) {
  codesign::ModelShape m = model;
  m.t = l.tp;
  m.b = l.micro_batch;
  codesign::ModelShape whole = m;
  whole.t = 1;
  const auto pc = codesign::count_parameters(whole);
  const double t = l.tp;
  const double per_layer = (pc.attention + pc.mlp + pc.router + pc.norm) / as_double(m.L);
  const double layers = per_layer * as_double(m.L) / l.pp / t;
  const double vh = as_double(m.v) * as_double(m.h) / t;
  const double in_emb = vh + pc.position;  // the position table is replicated over TP ranks
  const double out_emb = m.tied_embeddings ? (l.pp > 1 ? vh : 0.0) : vh;
  const double first = layers + in_emb + (l.pp == 1 ? out_emb : 0.0);
  const double last = layers + out_emb;

  const double e = codesign::dtype_bytes(m.dtype);
  const double dp = l.dp;
  const auto states = [&](double params, MemoryBreakdown& r) {
    r.weights = e * params / (l.zero >= 3 ? dp : 1.0);
    r.gradients = e * params / (l.zero >= 2 ? dp : 1.0);
    r.optimizer = options.optimizer_bytes_per_param * params / (l.zero >= 1 ? dp : 1.0);
  };

  // Activations of one layer and one microbatch, in units of s*b*h bytes. Kept whole on every TP
  // rank unless sequence parallel: two norm inputs, the QKV and MLP inputs (e each) and two
  // dropout masks (1 byte). Split over TP: Q, K, V (K and V scaled by a_kv/a), the projection
  // input, the MLP intermediates (GeLU: its input and output; SwiGLU: gate, up and product).
  // Unfused attention also keeps softmax output, dropout mask and dropout output per score.
  const double sp_div = l.sequence_parallel ? t : 1.0;
  const double r_kv = as_double(m.kv_heads()) / as_double(m.a);
  const double ff = as_double(m.d_ff) / as_double(m.h);
  const double mlp = (m.mlp == codesign::MlpType::swiglu ? 3.0 : 2.0) * ff * e;
  const double split = e * (1 + 2 * r_kv) + e + mlp;
  const double replicated = 4 * e + 2;
  const double scores = (2 * e + 1) * as_double(m.a) * as_double(m.s) / as_double(m.h);
  const bool keep_scores =
      m.attention == codesign::AttentionImpl::unfused && l.recompute == Recompute::none;
  const double sbh = as_double(m.s) * as_double(m.b) * as_double(m.h);
  const double full_layer = sbh * (replicated / sp_div + split / t + scores / t);
  double layer = sbh * (replicated / sp_div + split / t + (keep_scores ? scores / t : 0.0));
  if (l.recompute == Recompute::full) layer = sbh * e / sp_div;  // the layer input only

  // 1F1B: the first stage holds min(m, p) microbatches of its L/p layers; interleaving adds
  // (p - 1) / (p v) of that (Korthikanti et al. 2022, sec. 4.2.3). The last stage holds one.
  const double per_stage_layers = as_double(m.L) / l.pp;
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
  const double logits = as_double(m.s) * as_double(m.b) * as_double(m.v) / t * (e + 4);
  const double first_buf = l.pp == 1 ? logits : 0.0;
  const double last_buf = logits;
  const double zero3 = l.zero >= 3 ? 2 * per_layer / t * e : 0.0;  // current + prefetched layer
  MemoryBreakdown r_first, r_last;
  states(first, r_first);
  states(last, r_last);
  r_first.activations = first_act;
  r_first.buffers = first_buf + zero3;
  r_last.activations = last_act;
  r_last.buffers = last_buf + zero3;
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
