// The memory-bound side of FP8 training as Transformer Engine runs it on Hopper and Blackwell: an
// FP8 GEMM takes both operands in FP8, and the wgrad and dgrad GEMMs need them transposed, so
// every linear layer's input is cast to FP8 and to a transposed FP8 copy in the forward pass, its
// output gradient likewise in the backward pass, and its weight once per step (Megatron-Core keeps
// the cast weight for the step's other microbatches).
#include <set>
#include <string>
#include <utility>

#include "stage_cost.hpp"

namespace mcr::plan::detail {

namespace {

double as_double(std::int64_t v) {
  return static_cast<double>(v);
}

/// Inputs that come out of a norm: Transformer Engine's LayerNormLinear and LayerNormMLP write
/// the FP8 copies from the norm kernel, so the cast reads no extra 16-bit tensor.
bool after_norm(const std::string& role) {
  return role == "qkv" || role == "q_proj" || role == "q_down" || role == "kv_down" ||
         role == "mlp_gate" || role == "mlp_up" || role == "shared_gate" || role == "shared_up";
}

/// GEMMs that read the same input (Q, K and V; gate and up): one cast serves them all.
std::string input_of(const std::string& role) {
  if (role == "mlp_gate" || role == "mlp_up") return "mlp_in";
  if (role == "shared_gate" || role == "shared_up") return "shared_in";
  if (role == "moe_gate" || role == "moe_up") return "moe_in";
  if (role == "q_proj" || role == "q_down" || role == "kv_down") return "latent_in";
  return role;
}

}  // namespace

void add_fp8_casts(const Context& c, const std::vector<codesign::Gemm>& forward, LayerCost& cost) {
  const double e = c.elem();
  // Current scaling reads each tensor once more for its amax before the cast.
  const double amax = c.layout.fp8 == Fp8::current ? e : 0.0;
  const double microbatches = std::max<double>(1, static_cast<double>(c.layout.microbatches()));
  const SystemSpec& sys = c.comm.system();
  double fwd = 0, bwd = 0, weights = 0;
  int kernels_fwd = 0, kernels_bwd = 0;
  std::set<std::string> cast;
  for (const auto& g : forward) {
    if (g.pass != codesign::Pass::forward || !is_linear(g.role)) continue;
    const double batch = as_double(g.batch);
    // The input X[m x k]: FP8 and transposed FP8 (2 bytes per element), plus the 16-bit read
    // unless a norm kernel writes them.
    if (cast.insert(input_of(g.role)).second) {
      const double elements = batch * as_double(g.m) * as_double(g.k);
      fwd += elements * (2 + amax + (after_norm(g.role) ? 0.0 : e));
      ++kernels_fwd;
    }
    // The output gradient dY[m x n] read once, written as FP8 and transposed FP8.
    bwd += batch * as_double(g.m) * as_double(g.n) * (e + 2 + amax);
    ++kernels_bwd;
    // The weight W[k x n]: read, written as FP8 and transposed FP8, once per step.
    if (!c.layout.fp8_params) weights += batch * as_double(g.k) * as_double(g.n) * (e + 2 + amax);
  }
  const double f = memory_time(fwd + weights / microbatches, kernels_fwd, c.device, sys);
  const double b = memory_time(bwd, kernels_bwd, c.device, sys);
  cost.fp8_fwd += f;
  cost.fp8_bwd += b;
}

}  // namespace mcr::plan::detail
