// Flash (fused) attention of one layer: the kernels under causal masking and sliding windows, and
// Megatron-Core's context parallelism (ring attention): each of cp ranks holds two of 2*cp chunks
// of every sequence (so that causal work is balanced), computes its queries against one K/V block
// per step and passes K and V to the next rank meanwhile.
#include <algorithm>
#include <cmath>

#include "mcr/codesign/gemm_model.hpp"
#include "stage_cost.hpp"

namespace mcr::plan::detail {

namespace {

double as_double(std::int64_t v) {
  return static_cast<double>(v);
}

/// Share of a causal s x s score matrix a tiled kernel computes: the tiles on and below the
/// diagonal, (n + 1) / (2n) of n x n tiles of 128 (the block size of FlashAttention-2/3 and
/// cuDNN's fused attention on Hopper).
double causal_share(std::int64_t s) {
  const double n = std::ceil(as_double(s) / 128.0);
  return (n + 1) / (2 * n);
}

/// Share of an s x w band a causal sliding window computes: query i sees min(i + 1, w) keys.
double window_share(std::int64_t s, std::int64_t w) {
  return 1.0 - as_double(w) / (2.0 * as_double(s));
}

}  // namespace

void add_attention(const Context& c, const codesign::ModelShape& shape, std::int64_t span,
                   LayerCost& cost) {
  const Layout& l = c.layout;
  const std::int64_t s = shape.s;
  const std::int64_t cp = l.cp;
  const std::int64_t queries = s / cp;
  const std::int64_t heads = (shape.a + l.tp - 1) / l.tp;
  const std::int64_t k = shape.qk_head_dim() + shape.v_dim();
  const std::int64_t batch = shape.b * heads;
  const bool full = span >= s;

  // FLOPs in the convention of the GEMM list (every listed score computed): the rank's queries
  // against all the keys they may see.
  codesign::Gemm all;
  all.role = "attn_flash";
  all.m = queries;
  all.n = full ? s : span;
  all.k = k;
  all.batch = batch;
  all.dtype = shape.dtype;

  double fwd = 0, share = 1;
  if (full) {
    // One K/V block of s/cp keys per ring step; causal masking leaves the balanced half.
    codesign::Gemm block = all;
    block.n = queries;
    share = c.options.causal ? causal_share(s) : 1.0;
    fwd = as_double(cp) * codesign::predict(block, c.device).time_s * share;
  } else {
    share = c.options.causal ? window_share(s, span) : 1.0;
    fwd = codesign::predict(all, c.device).time_s * share;
  }
  // The backward kernel recomputes the scores and forms dV, dP, dQ and dK: five products of the
  // forward's two (Dao 2023, FlashAttention-2, sec. 3.1.2). The FLOP convention counts two.
  const double bwd = 2.5 * fwd;
  cost.fwd_gemm += fwd;
  cost.bwd_gemm += bwd;
  cost.attn_core_fwd += fwd;
  cost.fwd_flops += all.flops();
  cost.attn_core_flops += all.flops();
  cost.causal_saving_flops += all.flops() * (1 - share);

  if (cp <= 1) return;
  // The ring: per step, each rank sends its current K and V block (b * s/cp tokens of the heads it
  // holds; latent attention expands to every head) to the next CP rank while it computes. The
  // backward pass sends K, V and their gradients. A sliding window needs the blocks it reaches.
  const std::int64_t kv_heads = shape.is_mla() ? heads : (shape.kv_heads() + l.tp - 1) / l.tp;
  const double bytes = as_double(shape.b * queries) * as_double(kv_heads) *
                       as_double(shape.qk_head_dim() + shape.v_dim()) * c.elem();
  const SystemSpec& sys = c.comm.system();
  const Placement ring = place_group(l.cp, l.tp, sys.gpus_per_node);
  // The slowest hop sets the pace: inter-node when the ring leaves a node.
  const Placement hop{2, ring.nodes > 1 ? 1 : 2, ring.nodes > 1 ? 2 : 1};
  const double send = c.comm.cost(Collective::p2p, bytes, hop, comm_dtype(shape.dtype)).time_s;
  const double steps =
      full ? as_double(cp - 1)
           : std::min(as_double(cp - 1), std::ceil(as_double(span) / as_double(queries)));
  const double per_step_fwd = fwd / std::max(1.0, steps + 1);
  const double per_step_bwd = bwd / std::max(1.0, steps + 1);
  cost.cp_fwd += steps * std::max(0.0, send - per_step_fwd);
  cost.cp_bwd += steps * std::max(0.0, 2 * send - per_step_bwd);
}

}  // namespace mcr::plan::detail
