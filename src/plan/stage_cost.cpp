#include "stage_cost.hpp"

#include <algorithm>
#include <string>

#include "mcr/codesign/gemm_model.hpp"

namespace mcr::plan::detail {

namespace {

bool is_attention_core(const std::string& role) {
  return role == "attn_score" || role == "attn_over_value" || role == "attn_flash";
}

double as_double(std::int64_t v) {
  return static_cast<double>(v);
}

}  // namespace

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

LayerCost layer_cost(const codesign::ModelShape& m, const codesign::DeviceSpec& device,
                     const CommModel& comm, const Layout& layout) {
  LayerCost c;
  for (const auto& g : codesign::layer_gemms(m, true)) {
    const double t = codesign::predict(g, device).time_s;
    if (g.pass == codesign::Pass::forward) {
      c.fwd_gemm += t;
      c.fwd_flops += g.flops();
      if (is_attention_core(g.role)) {
        c.attn_core_fwd += t;
        c.attn_core_flops += g.flops();
      }
    } else {
      c.bwd_gemm += t;
    }
  }
  // Memory-bound kernels, forward, in bytes read + written (Korthikanti et al. 2022 list the same
  // tensors): two norms, two bias-dropout-add (input, residual, output, 1-byte mask), the MLP
  // activation, and for unfused attention the softmax and dropout over the b*a/t*s*s scores.
  const double e = codesign::dtype_bytes(m.dtype);
  const double sbh = as_double(m.s * m.b * m.h);
  const double sp_div = layout.sequence_parallel ? layout.tp : 1;
  const double t = layout.tp;
  const double ff = as_double(m.d_ff) / as_double(m.h);
  const SystemSpec& sys = comm.system();
  // Per class: bytes of the forward pass, elements, kernels. The backward of an element-wise
  // kernel reads the output gradient and the saved input and writes the input gradient: about
  // twice the forward traffic.
  const auto both = [&](const char* cls, double bytes, double elements, int kernels) {
    c.fwd_mem += kernel_time(cls, false, bytes, elements, kernels, device, sys);
    c.bwd_mem += kernel_time(cls, true, 2 * bytes, elements, kernels, device, sys);
  };
  both("norm", 2 * (2 * e) * sbh / sp_div, 2 * sbh / sp_div, 2);          // read + write, x2
  both("residual", 2 * (3 * e + 1) * sbh / sp_div, 2 * sbh / sp_div, 2);  // in, residual, out, mask
  both("activation", (m.mlp == codesign::MlpType::swiglu ? 3 : 2) * e * ff * sbh / t, ff * sbh / t,
       1);
  if (m.attention == codesign::AttentionImpl::unfused) {
    const double scores = as_double(m.b * m.a * m.s) * as_double(m.s) / t;
    const double attn = (4 * e + 1) * scores;  // softmax read+write, dropout read+write+mask
    c.attn_mem_fwd = kernel_time("attention", false, attn, scores, 2, device, sys);
    c.fwd_mem += c.attn_mem_fwd;
    c.bwd_mem += kernel_time("attention", true, 2 * attn, scores, 2, device, sys);
  }

  // Megatron tensor parallelism: two all-reduces of the b*s*h activations per layer and pass;
  // with sequence parallelism each becomes an all-gather plus a reduce-scatter, and the backward
  // pass all-gathers the layer inputs once more for the weight gradients.
  if (layout.tp > 1) {
    const Placement tp = place_group(layout.tp, 1, comm.system().gpus_per_node);
    const double act = sbh * e;
    const DType dt = comm_dtype(m.dtype);
    if (layout.sequence_parallel) {
      const double ag = comm.cost(Collective::all_gather, act, tp, dt).time_s;
      const double rs = comm.cost(Collective::reduce_scatter, act, tp, dt).time_s;
      c.tp_fwd = 2 * (ag + rs);
      c.tp_bwd = 2 * (ag + rs) + 2 * ag;
    } else {
      const double ar = comm.cost(Collective::all_reduce, act, tp, dt).time_s;
      c.tp_fwd = 2 * ar;
      c.tp_bwd = 2 * ar;
    }
  }
  return c;
}

EndsCost ends_cost(const codesign::ModelShape& m, const codesign::DeviceSpec& device,
                   const CommModel& comm, const Layout& layout) {
  EndsCost c;
  const double e = codesign::dtype_bytes(m.dtype);
  const double tokens = as_double(m.b * m.s);
  const double sbh = tokens * as_double(m.h);
  const Placement tp = place_group(layout.tp, 1, comm.system().gpus_per_node);
  const DType dt = comm_dtype(m.dtype);
  // Embedding: gather rows (write b*s*h), a vocabulary-parallel all-reduce when tp > 1, and the
  // backward scatter-add of the same size.
  c.embedding = kernel_time("embedding", false, sbh * e, sbh, 1, device, comm.system()) +
                kernel_time("embedding", true, 2 * sbh * e, sbh, 1, device, comm.system());
  if (layout.tp > 1) c.embedding += comm.cost(Collective::all_reduce, sbh * e, tp, dt).time_s;
  for (const auto& g : codesign::logit_gemms(m, true)) {
    c.logits_gemm += codesign::predict(g, device).time_s;
  }
  // Vocabulary-parallel cross entropy in fp32: max, exp-sum and the loss read the logits, the
  // backward writes their gradient: about five fp32 passes over b*s*v/t values, plus three small
  // all-reduces of b*s floats across the TP group.
  const double logits = tokens * as_double(m.v) / layout.tp;
  c.cross_entropy =
      kernel_time("cross_entropy", false, 5 * 4 * logits, logits, 4, device, comm.system());
  // The final layer norm before the logits (forward and backward), on the same stage.
  const double sp_div = layout.sequence_parallel ? layout.tp : 1;
  c.cross_entropy +=
      kernel_time("norm", false, 2 * e * sbh / sp_div, sbh / sp_div, 1, device, comm.system()) +
      kernel_time("norm", true, 4 * e * sbh / sp_div, sbh / sp_div, 1, device, comm.system());
  if (layout.tp > 1) {
    c.cross_entropy += 3 * comm.cost(Collective::all_reduce, tokens * 4, tp, DType::f32).time_s;
  }
  return c;
}

}  // namespace mcr::plan::detail
