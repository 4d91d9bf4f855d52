#include "shape_print.hpp"

#include <fmt/core.h>

#include <algorithm>
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

namespace {

// "ok" when every dimension reaches the device's alignment rule, else the dimensions that miss it:
// "n=50257: 2 B, x0.42" (largest power-of-two divisor in bytes, and the tier factor it costs).
std::string alignment_words(const Gemm& g, const GemmPrediction& p, const DeviceSpec& d) {
  const char* names[3] = {"m", "n", "k"};
  const std::int64_t dims[3] = {g.m, g.n, g.k};
  std::string s;
  for (std::size_t i = 0; i < 3; ++i) {
    if (p.alignment_bytes[i] >= d.alignment_bytes) continue;
    s += fmt::format("{}{}={}: {} B, x{:.2f}", s.empty() ? "" : "; ", names[i], dims[i],
                     p.alignment_bytes[i], p.alignment_factors[i]);
  }
  return s.empty() ? "ok" : s;
}

}  // namespace

std::string format_gemm_table(const ModelAnalysis& a, const DeviceSpec& d) {
  std::string out = fmt::format(
      "{:<15} {:<7} {:>7} {:>7} {:>7} {:>6} {:>9} {:>9} {:>6} {:>6} {:>10} {:>8} {:>6}  {:<8} {}\n",
      "role", "pass", "M", "N", "K", "batch", "GFLOP", "tile", "waves", "wave%", "time us",
      "TFLOP/s", "share", "bound", fmt::format("alignment (rule {} B)", d.alignment_bytes));
  const auto row = [&out, &d](const GemmResult& r, double whole) {
    const Gemm& g = r.gemm;
    const GemmPrediction& p = r.prediction;
    out += fmt::format(
        "{:<15} {:<7} {:>7} {:>7} {:>7} {:>6} {:>9.2f} {:>9} {:>6} {:>5.0f}% {:>10.1f} {:>8.1f} "
        "{:>5.1f}%  {:<8} {}\n",
        g.role, to_string(g.pass), g.m, g.n, g.k, g.batch, g.flops() / 1e9,
        fmt::format("{}x{}{}", p.tile.m, p.tile.n,
                    p.split_k > 1 ? fmt::format("/{}", p.split_k) : ""),
        p.waves, 100 * p.wave_efficiency, p.time_s * 1e6, p.tflops, 100 * p.time_s / whole,
        p.latency_bound ? "latency" : (p.memory_bound ? "memory" : "compute"),
        alignment_words(g, p, d));
  };
  for (const auto& r : a.layer)
    row(r, a.totals.time_per_layer_s);
  out += "-- once per model (share of the whole step):\n";
  for (const auto& r : a.logits)
    row(r, a.totals.step_time_s);
  out +=
      "share: of one layer's GEMM time (logits: of the step). alignment: dimensions below the "
      "rule, with their power-of-two alignment and the tier factor it costs.\n";
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
      "TFLOP/s, model {:.1f} TFLOP/s; candidates allow t in {{{}}}\n",
      advice.evaluated, human_count(advice.input_params), advice.input_totals.tflops,
      advice.input_totals.model_tflops, [&advice] {
        std::string s;
        for (const auto t : advice.tp_sizes)
          s += fmt::format("{}{}", s.empty() ? "" : ", ", t);
        return s;
      }());
  out += fmt::format("  error bar: gains under {:.1f}% are within the model's error ({})\n",
                     100 * advice.uncertainty, advice.uncertainty_source);
  if (advice.candidates.empty()) {
    out += "  no faster shape found within the budget: this shape is already on a good tier.\n";
    return out;
  }
  // Ranked by throughput (model TFLOP/s): a candidate with more parameters does more work per
  // step, so its step may take longer although it runs faster per FLOP; the step column says so.
  const double input_step = advice.input_totals.step_time_s;
  const auto row = [input_step](int rank, const std::string& changes, double params, double delta,
                                double layer, double model, double speedup, double step,
                                const std::string& note) {
    return fmt::format("  {:>3} {:>8.3f}x {:>9.1f} {:>9.1f} {:>9} {:>+7.2f}% {:>+7.2f}%  {}{}\n",
                       rank > 0 ? fmt::format("#{}", rank) : "", speedup, model, layer,
                       human_count(params), 100 * delta, 100 * (step / input_step - 1), changes,
                       note.empty() ? "" : fmt::format("  [{}]", note));
  };
  out += fmt::format("  {:>3} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}  {}\n", "", "TFLOP/s", "model TF",
                     "layer TF", "params", "delta", "step", "change  [what it fixes]");
  out += row(0, "(input)", advice.input_params, 0, advice.input_totals.tflops,
             advice.input_totals.model_tflops, 1.0, input_step, "");
  int rank = 1;
  bool in_bundles = false;
  for (const auto& c : advice.candidates) {
    if (rank == 1 && c.fields_changed == 1) out += "  one-field changes (try these first):\n";
    if (!in_bundles && c.fields_changed != 1) {
      out += "  bundled changes:\n";
      in_bundles = true;
    }
    std::string fixes;
    for (const auto& f : c.fixes)
      fixes += (fixes.empty() ? "fixes " : ", ") + f;
    if (fixes.empty()) fixes = "wave/tile fit";
    const std::string note = c.significant
                                 ? fixes
                                 : fmt::format("{}; gain < {:.1f}%: within the model's error",
                                               fixes, 100 * advice.uncertainty);
    out += row(rank++, c.changes, c.params, c.param_delta, c.totals.tflops, c.totals.model_tflops,
               c.model_speedup, c.totals.step_time_s, note);
  }
  if (std::none_of(advice.candidates.begin(), advice.candidates.end(),
                   [](const Candidate& c) { return c.significant; })) {
    out += fmt::format(
        "  No gain reaches the model's error bar ({:.1f}%): the shape is already on a good tier; "
        "measure before changing it.\n",
        100 * advice.uncertainty);
  }
  return out;
}

namespace {

// The factors of the efficiency model that moved between two predictions of the same GEMM role.
std::string causes(const GemmPrediction& x, const GemmPrediction& y) {
  std::string s;
  const auto moved = [&s](const char* what, double a, double b) {
    if (std::abs(b / a - 1.0) >= 0.01) {
      s += fmt::format("{}{} {:.0f}% -> {:.0f}%", s.empty() ? "" : ", ", what, 100 * a, 100 * b);
    }
  };
  moved("alignment", x.alignment_factor, y.alignment_factor);
  moved("wave fill", x.wave_efficiency, y.wave_efficiency);
  moved("tile fill", x.tile_efficiency, y.tile_efficiency);
  moved("K depth", x.k_efficiency, y.k_efficiency);
  if (x.tile.m != y.tile.m || x.tile.n != y.tile.n) {
    s += fmt::format("{}tile {}x{} -> {}x{}", s.empty() ? "" : ", ", x.tile.m, x.tile.n, y.tile.m,
                     y.tile.n);
  }
  return s.empty() ? "smaller or larger GEMM, same efficiency" : s;
}

}  // namespace

std::string format_why_faster(const ModelAnalysis& before, const ModelAnalysis& after) {
  std::string out;
  const auto line = [&out](const GemmResult& x, const GemmResult& y) {
    if (x.gemm.pass != Pass::forward) return;
    if (std::abs(y.prediction.tflops / x.prediction.tflops - 1.0) < 0.01) return;
    out += fmt::format("  {:<15} {:>7.1f} -> {:>7.1f} TFLOP/s  ({}x{}x{} -> {}x{}x{}): {}\n",
                       x.gemm.role, x.prediction.tflops, y.prediction.tflops, x.gemm.m, x.gemm.n,
                       x.gemm.k, y.gemm.m, y.gemm.n, y.gemm.k, causes(x.prediction, y.prediction));
  };
  for (std::size_t i = 0; i < before.layer.size() && i < after.layer.size(); ++i) {
    if (before.layer[i].gemm.role == after.layer[i].gemm.role)
      line(before.layer[i], after.layer[i]);
  }
  for (std::size_t i = 0; i < before.logits.size() && i < after.logits.size(); ++i)
    line(before.logits[i], after.logits[i]);
  return out.empty() ? "  no single GEMM changed by 1% or more\n" : out;
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

std::string ascii_plot(const std::string& field, const std::vector<SweepPoint>& pts, int width,
                       int height) {
  double lo = 0, hi = 0;
  bool any = false;
  for (const auto& p : pts) {
    if (!p.valid) continue;
    lo = any ? std::min(lo, p.totals.model_tflops) : p.totals.model_tflops;
    hi = any ? std::max(hi, p.totals.model_tflops) : p.totals.model_tflops;
    any = true;
  }
  if (!any || pts.size() < 2) return "";
  if (hi - lo < 1e-9) hi = lo + 1;
  // One column per point when they fit, else points share columns (the column keeps the best).
  const int cols = std::min<int>(width, static_cast<int>(pts.size()));
  std::vector<double> best(static_cast<std::size_t>(cols), -1);
  std::vector<bool> invalid(static_cast<std::size_t>(cols), false);
  for (std::size_t i = 0; i < pts.size(); ++i) {
    const auto c = static_cast<std::size_t>(i * static_cast<std::size_t>(cols) / pts.size());
    if (!pts[i].valid) {
      invalid[c] = true;
      continue;
    }
    best[c] = std::max(best[c], pts[i].totals.model_tflops);
  }
  std::vector<std::string> grid(static_cast<std::size_t>(height),
                                std::string(static_cast<std::size_t>(cols), ' '));
  for (std::size_t c = 0; c < best.size(); ++c) {
    if (best[c] < 0) {
      if (invalid[c]) grid.back()[c] = 'x';
      continue;
    }
    const int row = static_cast<int>(std::lround((best[c] - lo) / (hi - lo) * (height - 1)));
    grid[static_cast<std::size_t>(height - 1 - row)][c] = '*';
  }
  std::string out = fmt::format("model TFLOP/s vs {} (* = point, x = invalid shape)\n", field);
  for (int r = 0; r < height; ++r) {
    const double value = hi - (hi - lo) * r / (height - 1);
    out += fmt::format("{:>8.1f} |{}\n", value, grid[static_cast<std::size_t>(r)]);
  }
  out += fmt::format("         +{}\n", std::string(static_cast<std::size_t>(cols), '-'));
  const std::string first = fmt::format("{}", pts.front().value);
  const std::string last = fmt::format("{}", pts.back().value);
  const int gap = std::max(1, cols - static_cast<int>(first.size() + last.size()));
  out += fmt::format("          {}{}{}\n", first, std::string(static_cast<std::size_t>(gap), ' '),
                     last);
  return out;
}

}  // namespace mcr::cli
