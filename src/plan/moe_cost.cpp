// The mixture-of-experts block of one layer as Megatron-Core runs it with the all_to_all token
// dispatcher: the router on each rank's sequence-parallel tokens, a permutation that groups the
// routed copies by expert, all_to_all to the expert-parallel ranks that hold those experts, the
// experts as grouped GEMMs, and the way back (combine). Shared experts run on every token like a
// dense tensor-parallel MLP.
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

/// One dispatch (or combine) of `tokens` tokens routed to `k` experts each, `token_bytes` per copy,
/// over the expert-parallel group. The all_to_all dispatcher sends every copy to its expert's rank.
/// The flex dispatcher (DeepEP, HybridEP) sends a token once to each remote node that holds any of
/// its experts, (nodes - 1) (1 - (1 - 1/nodes)^k) nodes on average under balanced routing, and
/// forwards it to the experts' GPUs over NVLink; both links work at once.
double dispatch_time(const Context& c, const Placement& group, double tokens, double k,
                     double token_bytes, DType dtype) {
  const double copies = tokens * k * token_bytes;
  if (c.layout.moe_dispatcher == Dispatcher::alltoall || group.nodes <= 1) {
    return c.comm.cost(Collective::all_to_all, copies, group, dtype).time_s;
  }
  const SystemSpec& sys = c.comm.system();
  const double n = group.nodes;
  const double remote_nodes = (n - 1) * (1 - std::pow(1 - 1 / n, k));
  const double inter = tokens * remote_nodes * token_bytes;
  const double intra = copies * (group.size - 1.0) / group.size;
  return std::max(
      inter / sys.inter.bytes_per_s() + (n - 1) * sys.inter.latency_us * 1e-6,
      intra / sys.intra.bytes_per_s() + (group.per_node - 1.0) * sys.intra.latency_us * 1e-6);
}

}  // namespace

void add_moe(const Context& c, const codesign::ModelShape& shape, LayerCost& cost,
             std::vector<codesign::Gemm>& linear) {
  const Layout& l = c.layout;
  const SystemSpec& sys = c.comm.system();
  const double e = c.elem();
  const double h = as_double(shape.h);
  const int etp = l.expert_tp();
  // Tokens entering the block on one rank: its sequence-parallel shard, gathered over the
  // expert-tensor-parallel ranks.
  const double shard = c.tokens() / l.tp;
  const double tokens_in = shard * etp;
  const double routed = tokens_in * as_double(shape.top_k);  // copies this rank's experts see
  // Every expert receives its balanced share of the routed copies of the ep ranks (Megatron's
  // performance runs force-balance the routing); a capacity factor pads or drops to that many.
  const double cap = l.capacity_factor > 0 ? l.capacity_factor : 1.0;
  const std::int64_t local_experts = shape.experts / l.ep;
  const std::int64_t per_expert =
      std::max<std::int64_t>(1, ceil_to(routed * l.ep / as_double(shape.experts) * cap));
  const std::int64_t ff = shape.expert_width() / etp;
  const auto dt = shape.dtype;

  std::vector<codesign::Gemm> gemms;
  if (shape.gated_mlp()) add_gemm(gemms, "moe_gate", per_expert, ff, shape.h, local_experts, dt);
  add_gemm(gemms, "moe_up", per_expert, ff, shape.h, local_experts, dt);
  add_gemm(gemms, "moe_down", per_expert, shape.h, ff, local_experts, dt);
  if (shape.d_ff_shared > 0) {
    const std::int64_t tokens = ceil_to(c.tokens());
    const std::int64_t sff = (shape.d_ff_shared + l.tp - 1) / l.tp;
    if (shape.gated_mlp()) add_gemm(gemms, "shared_gate", tokens, sff, shape.h, 1, dt);
    add_gemm(gemms, "shared_up", tokens, sff, shape.h, 1, dt);
    add_gemm(gemms, "shared_down", tokens, shape.h, sff, 1, dt);
  }
  // The router scores the rank's own tokens against every expert, in the model dtype.
  add_gemm(gemms, "moe_router", ceil_to(shard), shape.experts, shape.h, 1, dt);
  for (const auto& g : gemms) {
    const double t = gemm_time(g, c);
    if (g.pass == codesign::Pass::forward) {
      cost.fwd_gemm += t;
      cost.fwd_flops += g.flops();
      if (is_linear(g.role)) linear.push_back(g);
    } else {
      cost.bwd_gemm += t;
    }
  }

  // Memory-bound: permute and unpermute the routed copies (read and write each), the experts'
  // activation over their tokens, the shared experts' activation; backward twice the traffic.
  const double copies = as_double(per_expert * local_experts);
  const double act_elems = copies * as_double(ff);
  const double gate = shape.gated_mlp() ? 3 : 2;
  double fwd_bytes = 2 * (2 * e * routed * h);
  const auto add_act = [&](double elements) {
    const double bytes = gate * e * elements;
    const double f = kernel_time("activation", false, bytes, elements, 1, c.device, sys);
    cost.fwd_mem += f;
    cost.bwd_mem += kernel_time("activation", true, 2 * bytes, elements, 1, c.device, sys);
    return f;
  };
  cost.moe_act_fwd += add_act(act_elems);
  if (shape.d_ff_shared > 0) add_act(c.tokens() * as_double(shape.d_ff_shared) / l.tp);
  fwd_bytes += 2 * e * shard * as_double(shape.experts);  // router softmax and top-k
  cost.fwd_mem += memory_time(fwd_bytes, 3, c.device, sys);
  cost.bwd_mem += memory_time(2 * fwd_bytes, 3, c.device, sys);

  // Dispatch and combine, forward and backward: each rank sends the routed copies of its own
  // sequence-parallel shard to the expert-parallel ranks that hold their experts; with expert
  // tensor parallelism the copies an expert receives are then gathered over its expert-TP ranks and
  // the results reduce-scattered back (Megatron-Core's all_to_all dispatcher).
  const DType cdt = comm_dtype(shape.dtype);
  double fwd = 0;
  if (l.ep > 1) {
    const Placement group = place_group(l.ep, etp, sys.gpus_per_node);
    fwd += 2 * dispatch_time(c, group, shard, as_double(shape.top_k), h * e, cdt);
  }
  if (etp > 1) {
    const Placement group = place_group(etp, 1, sys.gpus_per_node);
    const double bytes = shard * as_double(shape.top_k) * etp * h * e;
    fwd += c.comm.cost(Collective::all_gather, bytes, group, cdt).time_s +
           c.comm.cost(Collective::reduce_scatter, bytes, group, cdt).time_s;
  }
  cost.ep_fwd += fwd;
  cost.ep_bwd += fwd;
}

}  // namespace mcr::plan::detail
