// The mixture-of-experts block of one layer as Megatron-Core runs it with its all_to_all or flex
// token dispatcher: the router on each rank's sequence-parallel tokens, the routed copies sent to
// the expert-parallel ranks that hold their experts, the experts as Transformer Engine's grouped
// GEMMs, and the way back (combine). Shared experts run on every token like a dense
// tensor-parallel MLP. The block's memory-bound kernels are in moe_kernels.cpp.
#include <algorithm>
#include <cmath>

#include "mcr/codesign/gemm_model.hpp"
#include "stage_cost.hpp"

namespace mcr::plan::detail {

namespace {

double as_double(std::int64_t v) {
  return static_cast<double>(v);
}

std::int64_t ceil_to(double x) {
  return static_cast<std::int64_t>(std::ceil(x));
}

/// One dispatch (or combine) of the rank's `tokens` tokens, `token_bytes` each, over the
/// expert-parallel group. The all_to_all dispatcher sends every routed copy (k per token) to its
/// expert's rank. The flex dispatcher (DeepEP, HybridEP) sends a token once to each rank holding
/// any of its experts (`ranks` per token on average; DeepEP's dispatch layout marks each token per
/// rank, is_token_in_rank), and across nodes once to each remote node holding any,
/// (nodes - 1) (1 - (1 - 1/nodes)^k) nodes on average under balanced routing, forwarding it to the
/// experts' GPUs over NVLink; both links work at once.
// `copies`: the routed copies the all_to_all dispatcher sends (k per token, times the capacity
// factor); the flex dispatcher sends each token once per rank holding one of its k experts.
double dispatch_time(const Context& c, const Placement& group, double tokens, double copies,
                     double k, double ranks, double token_bytes, DType dtype) {
  if (c.layout.moe_dispatcher == Dispatcher::alltoall) {
    return c.comm.cost(Collective::all_to_all, copies * token_bytes, group, dtype).time_s;
  }
  const double delivered = tokens * ranks * token_bytes;
  if (group.nodes <= 1) return c.comm.cost(Collective::all_to_all, delivered, group, dtype).time_s;
  const SystemSpec& sys = c.comm.system();
  const double n = group.nodes;
  const double remote_nodes = (n - 1) * (1 - std::pow(1 - 1 / n, k));
  const double inter = tokens * remote_nodes * token_bytes;
  const double intra = delivered * (group.size - 1.0) / group.size;
  return std::max(
      inter / sys.inter.bytes_per_s() + (n - 1) * sys.inter.latency_us * 1e-6,
      intra / sys.intra.bytes_per_s() + (group.per_node - 1.0) * sys.intra.latency_us * 1e-6);
}

/// Rows an expert's GEMM must hold under an FP8 recipe: Megatron-Core pads each expert's tokens
/// to a multiple of 16 (32 for MXFP8) for the FP8 GEMMs (fp8_utils.py get_fp8_align_size).
std::int64_t fp8_alignment(Fp8 recipe) {
  if (recipe == Fp8::none) return 1;
  return recipe == Fp8::mxfp8 ? 32 : 16;
}

}  // namespace

MoeTokens moe_tokens(const Context& c, const codesign::ModelShape& shape) {
  const Layout& l = c.layout;
  MoeTokens t;
  // Every expert receives its balanced share of the routed copies of the ep ranks (Megatron's
  // performance runs force-balance the routing); a capacity factor pads or drops to that many.
  const double cap = l.capacity_factor > 0 ? l.capacity_factor : 1.0;
  const double k = as_double(shape.top_k);
  t.own = c.tokens() / l.tp;
  t.own_copies = t.own * k * cap;
  t.local_experts = shape.experts / l.ep;
  // Tokens entering the experts on one rank: its sequence-parallel shard, gathered over the
  // expert-tensor-parallel ranks, k copies each.
  const double routed = t.own * l.expert_tp() * k;
  const std::int64_t rows =
      std::max<std::int64_t>(1, ceil_to(routed * l.ep / as_double(shape.experts) * cap));
  t.expert_rows = as_double(rows * t.local_experts);
  // Expected EP ranks a token's k distinct experts fall on, experts drawn uniformly: each rank
  // holds E/ep of them and misses all k with probability C(E - E/ep, k) / C(E, k).
  const double experts = as_double(shape.experts);
  double miss = 1;
  for (std::int64_t i = 0; i < shape.top_k; ++i) {
    miss *= std::max(0.0, experts - as_double(t.local_experts) - as_double(i)) /
            (experts - as_double(i));
  }
  t.ranks_per_token = l.ep * (1 - miss);
  t.delivered = t.own * l.expert_tp() * t.ranks_per_token * cap;
  const std::int64_t align = fp8_alignment(l.fp8);
  t.rows_per_expert = (rows + align - 1) / align * align;
  // TEGroupedMLP pads with a copy (Transformer Engine's Fp8Padding, pytorch/module/fp8_padding.py,
  // which returns its input as is only when every count is aligned already); the flex dispatcher
  // (HybridEP) pads inside its own permutation (Megatron-Core moe_utils.py
  // skip_routed_expert_padding). Dropless routing leaves the counts unaligned: under forced
  // balancing each expert gets a random count around its share.
  t.fp8_pad_copy = l.fp8 != Fp8::none && l.moe_dispatcher == Dispatcher::alltoall &&
                   (l.capacity_factor <= 0 || rows % align != 0);
  return t;
}

double grouped_gemm_time(const codesign::Gemm& g, const Context& c) {
  // Transformer Engine's grouped GEMM (multi_stream_cublas_gemm in common/gemm/cublaslt_gemm.cu,
  // v2.14) issues expert i's cuBLAS GEMM on compute stream i % 4 (util/multi_stream.cpp: 4
  // streams): at most four experts' GEMMs share the GPU at a time, so tiles are quantized into
  // waves per group of four, not over every local expert at once.
  constexpr std::int64_t kStreams = 4;
  const std::int64_t full = g.batch / kStreams, rest = g.batch % kStreams;
  codesign::Gemm group = g;
  double t = 0;
  if (full > 0) {
    group.batch = kStreams;
    t += as_double(full) * gemm_time(group, c);
  }
  if (rest > 0) {
    group.batch = rest;
    t += gemm_time(group, c);
  }
  return t;
}

SharedExpertTime add_moe(const Context& c, const codesign::ModelShape& shape, LayerCost& cost,
                         std::vector<codesign::Gemm>& linear) {
  const Layout& l = c.layout;
  const SystemSpec& sys = c.comm.system();
  const double e = c.elem();
  const double h = as_double(shape.h);
  const int etp = l.expert_tp();
  const MoeTokens tokens = moe_tokens(c, shape);
  const std::int64_t ff = shape.expert_width() / etp;
  const auto dt = shape.dtype;

  // Megatron-Core's expert MLP: linear_fc1 computes gate and up together (2 d_e wide for a gated
  // MLP), linear_fc2 brings the result back to h.
  std::vector<codesign::Gemm> experts;
  const std::int64_t fc1 = (shape.gated_mlp() ? 2 : 1) * ff;
  add_gemm(experts, "moe_fc1", tokens.rows_per_expert, fc1, shape.h, tokens.local_experts, dt);
  add_gemm(experts, "moe_fc2", tokens.rows_per_expert, shape.h, ff, tokens.local_experts, dt);
  std::vector<codesign::Gemm> gemms;
  if (shape.d_ff_shared > 0) {
    const std::int64_t all = ceil_to(c.tokens());
    const std::int64_t sff = (shape.d_ff_shared + l.tp - 1) / l.tp;
    if (shape.gated_mlp()) add_gemm(gemms, "shared_gate", all, sff, shape.h, 1, dt);
    add_gemm(gemms, "shared_up", all, sff, shape.h, 1, dt);
    add_gemm(gemms, "shared_down", all, shape.h, sff, 1, dt);
  }
  // The router scores the rank's own tokens against every expert, in the model dtype.
  add_gemm(gemms, "moe_router", ceil_to(tokens.own), shape.experts, shape.h, 1, dt);
  const auto add = [&](const codesign::Gemm& g, double t) {
    if (g.pass == codesign::Pass::forward) {
      cost.fwd_gemm += t;
      cost.fwd_flops += g.flops();
      if (is_linear(g.role)) linear.push_back(g);
    } else {
      cost.bwd_gemm += t;
    }
  };
  for (const auto& g : experts)
    add(g, grouped_gemm_time(g, c));
  SharedExpertTime shared;
  for (const auto& g : gemms) {
    const double t = gemm_time(g, c);
    add(g, t);
    if (g.role.starts_with("shared_"))
      (g.pass == codesign::Pass::forward ? shared.fwd : shared.bwd) += t;
  }

  add_moe_kernels(c, shape, tokens, cost);

  // Dispatch and combine, forward and backward: each rank sends the routed copies of its own
  // sequence-parallel shard to the expert-parallel ranks that hold their experts; with expert
  // tensor parallelism the copies an expert receives are then gathered over its expert-TP ranks and
  // the results reduce-scattered back (Megatron-Core's all_to_all dispatcher).
  const DType cdt = comm_dtype(shape.dtype);
  double fwd = 0;
  if (l.ep > 1) {
    const Placement group = place_group(l.ep, etp, sys.gpus_per_node);
    fwd += 2 * dispatch_time(c, group, tokens.own, tokens.own_copies, as_double(shape.top_k),
                             tokens.ranks_per_token, h * e, cdt);
  }
  if (etp > 1) {
    const Placement group = place_group(etp, 1, sys.gpus_per_node);
    const double bytes = tokens.own_copies * etp * h * e;  // the routed copies, capacity included
    fwd += c.comm.cost(Collective::all_gather, bytes, group, cdt).time_s +
           c.comm.cost(Collective::reduce_scatter, bytes, group, cdt).time_s;
  }
  cost.ep_fwd += fwd;
  cost.ep_bwd += fwd;
  return shared;
}

}  // namespace mcr::plan::detail
