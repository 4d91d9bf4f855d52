#include "shape_print.hpp"

#include <fmt/core.h>

#include <cmath>

namespace mcr::cli {

using namespace codesign;

std::string human_count(double x) {
  const double ax = std::fabs(x);
  if (ax >= 1e12) return fmt::format("{:.2f}T", x / 1e12);
  if (ax >= 1e9) return fmt::format("{:.3f}B", x / 1e9);
  if (ax >= 1e6) return fmt::format("{:.2f}M", x / 1e6);
  if (ax >= 1e3) return fmt::format("{:.1f}K", x / 1e3);
  return fmt::format("{:.0f}", x);
}

namespace {
std::string gib(double bytes) {
  return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024 * 1024));
}
}  // namespace

std::string format_device(const DeviceSpec& d, DType dtype) {
  return fmt::format(
      "Device {}: {} | {} units, {:.0f} MHz, {:.1f} TFLOP/s dense {} (x{:.3f} achievable), "
      "{:.0f} GB/s, alignment rule {} B = {} elements\n",
      d.name, d.description, d.compute_units, d.clock_mhz, d.peak_for(dtype), to_string(dtype),
      d.efficiency.peak_fraction, d.memory_bandwidth_gbs, d.alignment_bytes,
      d.alignment_elements(dtype));
}

std::string format_gemm_table(const ModelAnalysis& a, const DeviceSpec& d) {
  std::string out = fmt::format(
      "{:<16} {:<7} {:>7} {:>7} {:>7} {:>6} {:>9} {:>7} {:>9} {:>6} {:>6} {:>13} {:>10} {:>8} "
      "{}\n",
      "role", "pass", "M", "N", "K", "batch", "GFLOP", "FLOP/B", "tile", "waves", "wave%",
      "align m/n/k B", "time us", "TFLOP/s", "bound");
  const auto row = [&out, &d](const GemmResult& r) {
    const Gemm& g = r.gemm;
    const GemmPrediction& p = r.prediction;
    const auto cap = [&d](std::int64_t bytes) {
      return bytes >= d.alignment_bytes ? fmt::format("{}+", d.alignment_bytes)
                                        : fmt::format("{}", bytes);
    };
    out += fmt::format(
        "{:<16} {:<7} {:>7} {:>7} {:>7} {:>6} {:>9.2f} {:>7.0f} {:>9} {:>6} {:>5.0f}% {:>13} "
        "{:>10.1f} {:>8.1f} {}\n",
        g.role, to_string(g.pass), g.m, g.n, g.k, g.batch, g.flops() / 1e9,
        g.arithmetic_intensity(),
        fmt::format("{}x{}{}", p.tile.m, p.tile.n,
                    p.split_k > 1 ? fmt::format("/{}", p.split_k) : ""),
        p.waves, 100 * p.wave_efficiency,
        fmt::format("{}/{}/{}", cap(p.alignment_bytes[0]), cap(p.alignment_bytes[1]),
                    cap(p.alignment_bytes[2])),
        p.time_s * 1e6, p.tflops,
        p.latency_bound ? "latency" : (p.memory_bound ? "memory" : "compute"));
  };
  for (const auto& r : a.layer)
    row(r);
  out += "-- once per model:\n";
  for (const auto& r : a.logits)
    row(r);
  return out;
}

std::string format_totals(const ModelAnalysis& a) {
  const AnalysisTotals& t = a.totals;
  return fmt::format(
      "Totals ({}; GEMMs only): time per layer {:.3f} ms, layer throughput {:.1f} TFLOP/s; "
      "logits {:.3f} ms\n"
      "  step (L={} layers + logits, one microbatch) {:.2f} ms, {:.1f} TFLOP/s, "
      "{:.0f} tokens/s per GPU, MFU {:.1f}%\n",
      a.training ? "training: forward + backward" : "forward", t.time_per_layer_s * 1e3, t.tflops,
      t.logits_time_s * 1e3, a.model.L, t.step_time_s * 1e3, t.model_tflops, t.tokens_per_s_per_gpu,
      100 * t.mfu);
}

std::string format_findings(const std::vector<Finding>& findings) {
  if (findings.empty()) return "Guidelines: all checks pass.\n";
  std::string out = "Guidelines:\n";
  for (const auto& f : findings) {
    out += fmt::format("  [{}] {}: {}\n      fix: {}\n", to_string(f.severity), f.id, f.message,
                       f.fix);
  }
  return out;
}

std::string format_advice(const Advice& advice) {
  std::string out = fmt::format(
      "Advisor: {} shapes within the parameter budget analysed; input {} params, layer {:.1f} "
      "TFLOP/s, model {:.1f} TFLOP/s\n",
      advice.evaluated, human_count(advice.input_params), advice.input_totals.tflops,
      advice.input_totals.model_tflops);
  if (advice.candidates.empty()) {
    out += "  no faster shape found within the budget: this shape is already on a good tier.\n";
    return out;
  }
  int rank = 1;
  for (const auto& c : advice.candidates) {
    std::string fixes;
    for (const auto& f : c.fixes)
      fixes += (fixes.empty() ? "" : ", ") + f;
    out += fmt::format(
        "  #{} {:<40} params {} ({:+.2f}%)  layer {:.1f} TFLOP/s ({:.3f}x)  model {:.1f} "
        "TFLOP/s ({:.3f}x)\n      fixes: {}\n",
        rank++, c.changes, human_count(c.params), 100 * c.param_delta, c.totals.tflops, c.speedup,
        c.totals.model_tflops, c.model_speedup, fixes.empty() ? "(wave/tile fit only)" : fixes);
  }
  return out;
}

std::string format_calculators(const ParamCount& p, const FlopCount& f, const MemoryEstimate& train,
                               const MemoryEstimate& infer) {
  std::string out = fmt::format(
      "Parameters: {} total ({} active per token), {} non-embedding; embeddings {}, attention {}, "
      "MLP {}, norms {}\n",
      human_count(p.total), human_count(p.active), human_count(p.non_embedding),
      human_count(p.embedding + p.position), human_count(p.attention),
      human_count(p.mlp + p.router), human_count(p.norm));
  out += fmt::format(
      "FLOPs per microbatch: forward {:.3g}, training {:.3g} (with recomputation {:.3g}); "
      "{:.3g} forward FLOPs per token\n",
      f.forward_per_step, f.training_per_step, f.training_recompute_per_step, f.forward_per_token);
  out += fmt::format(
      "Memory per GPU, training: weights {}, gradients {}, optimizer {}, activations {}, "
      "total {}\n",
      gib(train.weights), gib(train.gradients), gib(train.optimizer), gib(train.activations),
      gib(train.total));
  out += fmt::format(
      "Memory per GPU, inference: weights {}, KV cache {}, activations {}, total {}\n",
      gib(infer.weights), gib(infer.kv_cache), gib(infer.activations), gib(infer.total));
  return out;
}

std::string format_sweep(const std::string& field, const std::vector<SweepPoint>& pts) {
  std::string out = fmt::format("{:>8} {:>10} {:>12} {:>12} {:>12} {:>8}\n", field, "params",
                                "layer TF/s", "model TF/s", "tokens/s", "MFU");
  for (const auto& p : pts) {
    if (p.valid) {
      out += fmt::format("{:>8} {:>10} {:>12.1f} {:>12.1f} {:>12.0f} {:>7.1f}%\n", p.value,
                         human_count(p.params), p.totals.tflops, p.totals.model_tflops,
                         p.totals.tokens_per_s_per_gpu, 100 * p.totals.mfu);
    } else {
      out += fmt::format("{:>8} invalid: {}\n", p.value, p.reason);
    }
  }
  return out;
}

}  // namespace mcr::cli
