#include "stage_cost.hpp"

#include <algorithm>
#include <string>

#include "mcr/codesign/gemm_model.hpp"

namespace mcr::plan::detail {

namespace {

double as_double(std::int64_t v) {
  return static_cast<double>(v);
}

bool is_moe_role(const std::string& role) {
  return role.rfind("moe_", 0) == 0 || role.rfind("shared_", 0) == 0;
}

/// One kind of layer (codesign::layer_groups): its GEMMs, attention, MoE block, memory-bound
/// kernels, FP8 casts and tensor-parallel collectives, per microbatch on one GPU.
LayerCost group_cost(const Context& c, const codesign::ModelShape& shape, std::int64_t span) {
  LayerCost cost;
  const Layout& layout = c.layout;
  const SystemSpec& sys = c.comm.system();
  const bool flash = shape.attention == codesign::AttentionImpl::flash;
  const bool moe = shape.is_moe();
  // The GEMMs of the rank's b*s/cp tokens. Flash attention and the MoE block are timed on their
  // own (ring steps, causal masking, tokens per local expert); the unfused BMMs are the listed
  // s x s ones (context parallelism needs flash attention).
  codesign::ModelShape local = shape;
  local.s = shape.s / layout.cp;
  std::vector<codesign::Gemm> linear_fwd;
  double linear_fwd_time = 0, linear_bwd_time = 0;
  for (const auto& g : codesign::layer_gemms(local, true, span)) {
    if (g.role == "attn_flash") continue;
    if (moe && (is_moe_role(g.role) || g.role == "moe_router")) continue;
    const bool attention_core = g.role == "attn_score" || g.role == "attn_over_value";
    const codesign::Gemm& x = g;
    const double t = gemm_time(x, c);
    if (x.pass == codesign::Pass::forward) {
      cost.fwd_gemm += t;
      cost.fwd_flops += x.flops();
      if (attention_core) {
        cost.attn_core_fwd += t;
        cost.attn_core_flops += x.flops();
      } else {
        linear_fwd.push_back(x);
        linear_fwd_time += t;
      }
    } else {
      cost.bwd_gemm += t;
      if (!attention_core) linear_bwd_time += t;
    }
  }
  if (flash) add_attention(c, shape, span, cost);
  if (moe) {
    // Shared experts run with tensor parallelism like a dense MLP: their GEMMs cover the TP
    // collectives of that half of the layer. The routed experts (expert parallel, their own
    // expert-TP group) and the router sit between the dispatcher's all_to_alls, not beside a TP
    // collective, so they hide none of it.
    const SharedExpertTime shared = add_moe(c, shape, cost, linear_fwd);
    linear_fwd_time += shared.fwd;
    linear_bwd_time += shared.bwd;
  }

  // Memory-bound kernels, forward, in bytes read + written (Korthikanti et al. 2022 list the same
  // tensors): two norms, two bias-dropout-add (input, residual, output, 1-byte mask), the MLP
  // activation, and for unfused attention the softmax and dropout over the b*a/t*s*s scores.
  const double e = c.elem();
  const double sbh = c.tokens() * as_double(shape.h);
  const double sp_div = layout.sequence_parallel ? layout.tp : 1;
  const double t = layout.tp;
  const double ff = as_double(shape.d_ff) / as_double(shape.h);
  // Per class: bytes of the forward pass, elements, kernels. The backward of an element-wise
  // kernel reads the output gradient and the saved input and writes the input gradient: about
  // twice the forward traffic.
  const auto both = [&](const char* cls, double bytes, double elements, int kernels) {
    cost.fwd_mem += kernel_time(cls, false, bytes, elements, kernels, c.device, sys);
    cost.bwd_mem += kernel_time(cls, true, 2 * bytes, elements, kernels, c.device, sys);
  };
  const double norm_before = cost.fwd_mem;
  both("norm", 2 * (2 * e) * sbh / sp_div, 2 * sbh / sp_div, 2);  // read + write, x2
  cost.norm_fwd = cost.fwd_mem - norm_before;
  both("residual", 2 * (3 * e + 1) * sbh / sp_div, 2 * sbh / sp_div, 2);  // in, residual, out, mask
  if (!moe) {
    both("activation", (shape.gated_mlp() ? 3 : 2) * e * ff * sbh / t, ff * sbh / t, 1);
  }
  if (shape.attention == codesign::AttentionImpl::unfused) {
    const double scores = as_double(shape.b * shape.a * shape.s) * as_double(shape.s) / t;
    const double attn = (4 * e + 1) * scores;  // softmax read+write, dropout read+write+mask
    cost.attn_mem_fwd = kernel_time("attention", false, attn, scores, 2, c.device, sys);
    cost.fwd_mem += cost.attn_mem_fwd;
    cost.bwd_mem += kernel_time("attention", true, 2 * attn, scores, 2, c.device, sys);
  }
  if (c.fp8()) add_fp8_casts(c, linear_fwd, cost);

  // Megatron tensor parallelism: two all-reduces of the b*s*h activations per layer and pass;
  // with sequence parallelism each becomes an all-gather plus a reduce-scatter, and the backward
  // pass all-gathers the layer inputs once more for the weight gradients. An MoE layer without
  // shared experts has the attention half only: its tokens stay sequence-parallel through the
  // dispatcher.
  if (layout.tp > 1) {
    const Placement tp = place_group(layout.tp, 1, sys.gpus_per_node);
    const double act = sbh * e;
    const DType dt = comm_dtype(shape.dtype);
    const double halves = (!moe || shape.d_ff_shared > 0) ? 2.0 : 1.0;
    double fwd = 0, bwd = 0;
    if (layout.sequence_parallel) {
      const double ag = c.comm.cost(Collective::all_gather, act, tp, dt).time_s;
      const double rs = c.comm.cost(Collective::reduce_scatter, act, tp, dt).time_s;
      fwd = halves * (ag + rs);
      bwd = halves * (ag + rs) + halves * ag;
    } else {
      const double ar = c.comm.cost(Collective::all_reduce, act, tp, dt).time_s;
      fwd = halves * ar;
      bwd = halves * ar;
    }
    cost.tp_fwd = exposed_tp(fwd, linear_fwd_time, layout);
    cost.tp_bwd = exposed_tp(bwd, linear_bwd_time, layout);
  }
  return cost;
}

void accumulate(LayerCost& sum, const LayerCost& x, double w) {
  sum.fwd_gemm += w * x.fwd_gemm;
  sum.bwd_gemm += w * x.bwd_gemm;
  sum.attn_core_fwd += w * x.attn_core_fwd;
  sum.fwd_mem += w * x.fwd_mem;
  sum.bwd_mem += w * x.bwd_mem;
  sum.attn_mem_fwd += w * x.attn_mem_fwd;
  sum.norm_fwd += w * x.norm_fwd;
  sum.moe_act_fwd += w * x.moe_act_fwd;
  sum.fp8_fwd += w * x.fp8_fwd;
  sum.fp8_bwd += w * x.fp8_bwd;
  sum.tp_fwd += w * x.tp_fwd;
  sum.tp_bwd += w * x.tp_bwd;
  sum.cp_fwd += w * x.cp_fwd;
  sum.cp_bwd += w * x.cp_bwd;
  sum.ep_fwd += w * x.ep_fwd;
  sum.ep_bwd += w * x.ep_bwd;
  sum.fwd_flops += w * x.fwd_flops;
  sum.attn_core_flops += w * x.attn_core_flops;
  sum.causal_saving_flops += w * x.causal_saving_flops;
}

}  // namespace

double Context::tokens() const {
  return as_double(model.b) * as_double(model.s) / layout.cp;
}

double Context::elem() const {
  return codesign::dtype_bytes(model.dtype);
}

DType comm_dtype(codesign::DType d) {
  switch (d) {
    case codesign::DType::fp64:
      return DType::f64;
    case codesign::DType::fp32:
    case codesign::DType::tf32:
      return DType::f32;
    case codesign::DType::fp16:
      return DType::f16;
    case codesign::DType::bf16:
      return DType::bf16;
    case codesign::DType::fp8:
    case codesign::DType::int8:
      return DType::u8;
  }
  return DType::f32;
}

double gradient_bytes(const PlanOptions& options, codesign::DType model) {
  return options.grad_bytes_per_param > 0 ? options.grad_bytes_per_param
                                          : codesign::dtype_bytes(model);
}

DType gradient_comm_dtype(const PlanOptions& options, codesign::DType model) {
  if (options.grad_dtype) return comm_dtype(*options.grad_dtype);
  const double bytes = gradient_bytes(options, model);
  if (bytes >= 4) return DType::f32;
  if (bytes == codesign::dtype_bytes(model)) return comm_dtype(model);
  return bytes >= 2 ? DType::bf16 : DType::u8;
}

double memory_time(double bytes, int kernels, const codesign::DeviceSpec& device,
                   const SystemSpec& system) {
  const double eff =
      system.stream_efficiency > 0 ? system.stream_efficiency : device.efficiency.memory_efficiency;
  const double bw = device.memory_bandwidth_gbs * 1e9 * eff;
  return bytes / bw + kernels * device.efficiency.launch_overhead_s;
}

double kernel_time(const std::string& cls, bool backward, double bytes, double elements,
                   int kernels, const codesign::DeviceSpec& device, const SystemSpec& system) {
  // A measured rate is the kernel's own time on this device, its memory traffic included; it
  // replaces the bytes, whose bandwidth (a detected copy rate on a CPU) would count it twice.
  if (const auto it = system.elementwise_ns.find(cls); it != system.elementwise_ns.end()) {
    const double ns = backward ? it->second.backward_ns : it->second.forward_ns;
    return elements * ns * 1e-9 + kernels * device.efficiency.launch_overhead_s;
  }
  return memory_time(bytes, kernels, device, system);
}

bool is_linear(const std::string& role) {
  return role != "attn_score" && role != "attn_over_value" && role != "attn_flash" &&
         role != "logits" && role != "moe_router";
}

double gemm_time(const codesign::Gemm& g, const Context& c) {
  if (c.fp8() && is_linear(g.role)) {
    codesign::Gemm x = g;
    x.dtype = codesign::DType::fp8;
    return codesign::predict(x, c.fp8_device).time_s;
  }
  return codesign::predict(g, c.device).time_s;
}

void add_gemm(std::vector<codesign::Gemm>& out, const char* role, std::int64_t m, std::int64_t n,
              std::int64_t k, std::int64_t batch, codesign::DType dtype) {
  codesign::Gemm f;
  f.role = role;
  f.m = m;
  f.n = n;
  f.k = k;
  f.batch = batch;
  f.dtype = dtype;
  out.push_back(f);
  // dgrad dX[MxK] = dY[MxN] W^T and wgrad dW[KxN] = X^T dY, as codesign lists them.
  codesign::Gemm d = f;
  d.pass = codesign::Pass::dgrad;
  d.n = f.k;
  d.k = f.n;
  out.push_back(d);
  codesign::Gemm w = f;
  w.pass = codesign::Pass::wgrad;
  w.m = f.k;
  w.n = f.n;
  w.k = f.m;
  out.push_back(w);
}

double exposed_tp(double comm, double gemm, const Layout& layout) {
  if (!layout.tp_comm_overlap || layout.tp <= 1) return comm;
  const double first = comm / layout.tp;
  return first + std::max(0.0, comm - first - gemm);
}

LayerCost layer_cost(const Context& c) {
  LayerCost sum;
  const double layers = as_double(c.model.L);
  for (const auto& group : codesign::layer_groups(c.model)) {
    accumulate(sum, group_cost(c, group.shape, group.span), as_double(group.count) / layers);
  }
  return sum;
}

EndsCost ends_cost(const Context& ctx) {
  EndsCost c;
  const codesign::ModelShape& m = ctx.model;
  const Layout& layout = ctx.layout;
  const SystemSpec& sys = ctx.comm.system();
  const double e = ctx.elem();
  const double tokens = ctx.tokens();
  const double sbh = tokens * as_double(m.h);
  const Placement tp = place_group(layout.tp, 1, sys.gpus_per_node);
  const DType dt = comm_dtype(m.dtype);
  // Embedding: gather rows (write b*s*h), a vocabulary-parallel all-reduce when tp > 1, and the
  // backward scatter-add of the same size.
  c.embedding = kernel_time("embedding", false, sbh * e, sbh, 1, ctx.device, sys) +
                kernel_time("embedding", true, 2 * sbh * e, sbh, 1, ctx.device, sys);
  if (layout.tp > 1) c.embedding += ctx.comm.cost(Collective::all_reduce, sbh * e, tp, dt).time_s;
  // The logits stay in the model dtype under FP8 recipes (Transformer Engine leaves the output
  // layer out); the rank's b*s/cp tokens.
  codesign::ModelShape local = m;
  local.s = m.s / layout.cp;
  for (const auto& g : codesign::logit_gemms(local, true)) {
    c.logits_gemm += codesign::predict(g, ctx.device).time_s;
  }
  // Vocabulary-parallel cross entropy in fp32: max, exp-sum and the loss read the logits, the
  // backward writes their gradient: about five fp32 passes over b*s*v/t values, plus three small
  // all-reduces of b*s floats across the TP group.
  const double logits = tokens * as_double(m.v) / layout.tp;
  c.cross_entropy = kernel_time("cross_entropy", false, 5 * 4 * logits, logits, 4, ctx.device, sys);
  // The final layer norm before the logits (forward and backward), on the same stage.
  const double sp_div = layout.sequence_parallel ? layout.tp : 1;
  c.cross_entropy +=
      kernel_time("norm", false, 2 * e * sbh / sp_div, sbh / sp_div, 1, ctx.device, sys) +
      kernel_time("norm", true, 4 * e * sbh / sp_div, sbh / sp_div, 1, ctx.device, sys);
  if (layout.tp > 1) {
    c.cross_entropy += 3 * ctx.comm.cost(Collective::all_reduce, tokens * 4, tp, DType::f32).time_s;
  }
  return c;
}

}  // namespace mcr::plan::detail
