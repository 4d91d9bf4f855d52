#include "plan_print.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

namespace mcr::cli {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string row(std::string_view name, double seconds, double total) {
  return fmt::format("  {:<22} {:>10.4f} s  {:>5.1f} %\n", name, seconds,
                     total > 0 ? 100 * seconds / total : 0.0);
}

std::string mem_row(const char* name, double bytes) {
  return fmt::format("  {:<22} {:>8.2f} GiB\n", name, bytes / kGiB);
}

std::string layout_row(int rank, const plan::PlanResult& r) {
  const auto& l = r.layout;
  const std::string states =
      l.distributed_optimizer ? std::string("dist") : fmt::format("{}", l.zero);
  return fmt::format(
      "{:>3}  {:>3} {:>3} {:>3} {:>5} {:>3} {:>3} {:>2} {:<9} {:<3} {:>4}  {:>9.3f}  {:>9.0f}  "
      "{:>7.1f}  {:>5.1f}  {:>6.1f}  {:>6.1f}\n",
      rank, l.tp, l.cp, l.pp, l.dp, l.ep, l.micro_batch, l.interleave, plan::to_string(l.recompute),
      l.sequence_parallel ? "on" : "off", states, r.step_time_s, r.tokens_per_s_per_gpu,
      r.tflops_per_gpu, 100 * r.mfu, 100 * r.bubble_fraction, r.memory.total / kGiB);
}

const char* kHeader =
    "  #   tp  cp  pp    dp  ep  mb  v recompute sp  zero     step s  tok/s/GPU  TFLOP/s  MFU %  "
    "bubble %  mem GiB\n";

}  // namespace

std::string peak_line(const codesign::DeviceSpec& dev, codesign::DType dtype) {
  const auto j = plan::peak_to_json(dev, dtype);
  return fmt::format("device peak: {} {} TFLOP/s ({})\n", j["dtype"].get<std::string>(),
                     dev.supports(dtype) ? fmt::format("{:.4g}", dev.peak_for(dtype)) : "none",
                     j["source"].get<std::string>());
}

std::string format_plan(const plan::PlanResult& r) {
  const auto& b = r.breakdown;
  const double T = r.step_time_s;
  std::string s;
  s += fmt::format(
      "layout: {} on {} GPUs ({} microbatches per pipeline, bubble {:.1f} % of compute)\n",
      plan::describe(r.layout), r.layout.gpus, r.layout.microbatches(), 100 * r.bubble_fraction);
  s += fmt::format("device: {}, system: {}, parameters: {:.3f} B\n\n", r.device, r.system,
                   r.params / 1e9);
  s += fmt::format("step time        {:.4f} s   ({:.0f} tokens/s, {:.0f} tokens/s/GPU)\n", T,
                   r.tokens_per_s, r.tokens_per_s_per_gpu);
  s += fmt::format(
      "TFLOP/s per GPU  {:.1f} counting recomputation (HFU {:.1f} %), {:.1f} model (MFU {:.1f} "
      "%)\n",
      r.tflops_per_gpu, 100 * r.hfu, r.model_tflops_per_gpu, 100 * r.mfu);
  s += fmt::format(
      "                 model FLOPs count attention over all s x s scores (Megatron-LM/NeMo);\n"
      "                 with causal attention halved: MFU {:.1f} %; peak {:.4g} TFLOP/s\n\n",
      100 * r.mfu_causal, r.peak_tflops);
  s += "breakdown (slowest pipeline stage):\n";
  for (const plan::BreakdownTerm& t : plan::breakdown_terms()) {
    // A term its layout does not call for is left out, unless it costs something all the same
    // (the expert-TP gathers of an MoE model without expert parallelism).
    if (t.applies == nullptr || t.applies(r.layout) || b.*t.field > 0) {
      s += row(t.label, b.*t.field, T);
    }
  }
  const auto& m = r.memory;
  if (m.capacity > 0) {
    s += fmt::format("\nmemory per GPU: {:.2f} GiB of {:.2f} GiB: {}\n", m.total / kGiB,
                     m.capacity / kGiB, m.fits ? "fits" : "DOES NOT FIT");
  } else {
    s += fmt::format("\nmemory per GPU: {:.2f} GiB (the device gives no capacity)\n",
                     m.total / kGiB);
  }
  s += mem_row("weights", m.weights);
  s += mem_row("gradients", m.gradients);
  s += mem_row("optimizer state", m.optimizer);
  s += mem_row("activations", m.activations);
  s += mem_row("buffers", m.buffers);
  if (!r.notes.empty()) {
    s += "\nnotes:\n";
    for (const auto& n : r.notes)
      s += "  " + n + "\n";
  }
  return s;
}

std::string format_search(const plan::SearchResult& s, double seconds) {
  std::string out = fmt::format(
      "{} layouts predicted ({} combinations invalid, {} out of memory) in {:.2f} s\n\n",
      s.evaluated, s.rejected, s.out_of_memory, seconds);
  if (s.ranked.empty() && s.evaluated == 0 && s.rejected > 0) {
    out += fmt::format("no valid layout: every combination was refused; the first because {}\n",
                       s.first_rejection);
  } else if (s.ranked.empty()) {
    out += "no layout fits in memory\n";
  } else {
    out += "fastest layouts that fit:\n";
    out += kHeader;
    int i = 1;
    for (const auto& r : s.ranked)
      out += layout_row(i++, r);
  }
  // Only layouts faster than the best one that fits are worth showing: they say what memory costs.
  std::string faster;
  int i = 1;
  for (const auto& r : s.too_big) {
    if (!s.ranked.empty() && r.step_time_s >= s.ranked.front().step_time_s) break;
    faster += layout_row(i++, r);
  }
  if (!faster.empty()) {
    out += "\nfaster layouts that do not fit in memory (not ranked):\n";
    out += kHeader;
    out += faster;
  }
  return out;
}

std::string format_advice(const std::vector<plan::AdvisedPair>& pairs) {
  if (pairs.empty()) return "no (shape, layout) pair fits in memory\n";
  std::string out = "best (shape, layout) pairs, fastest first:\n";
  int i = 1;
  for (const auto& p : pairs) {
    const auto& r = p.best;
    out += fmt::format(
        "{:>3}  {:<40} params {:+.2f} %  {}\n     step {:.4f} s  {:.1f} TFLOP/s/GPU  "
        "MFU {:.1f} %  {:.1f} GiB\n",
        i++, p.shape.changes.empty() ? "(input shape)" : p.shape.changes, 100 * p.shape.param_delta,
        plan::describe(r.layout), r.step_time_s, r.tflops_per_gpu, 100 * r.mfu,
        r.memory.total / kGiB);
  }
  return out;
}

std::string format_validation(const std::vector<plan::ValidationRow>& rows) {
  const bool mixed = std::any_of(rows.begin(), rows.end(), [&rows](const plan::ValidationRow& r) {
    return r.quantity != rows.front().quantity;
  });
  std::string out =
      "run                   layout                                                      "
      "published  predicted   error\n";
  double sum = 0, worst = 0;
  for (const auto& r : rows) {
    out +=
        fmt::format("{:<21} {:<59} {:>9.3f}  {:>9.3f}  {:>+6.1f} %", r.run.name,
                    plan::describe(r.predicted.layout), r.published, r.prediction, 100 * r.error);
    if (mixed) out += fmt::format("  ({}; step {:+.1f} %)", r.quantity, 100 * r.step_error);
    out += "\n";
    sum += std::abs(r.error);
    worst = std::max(worst, std::abs(r.error));
  }
  if (rows.empty()) return out;
  if (!mixed) {
    out += fmt::format("\nmean |error| {:.2f} %, max |error| {:.2f} % over {} runs\n",
                       100 * sum / static_cast<double>(rows.size()), 100 * worst, rows.size());
  }
  // Per system and precision, as step-time errors (a throughput's error inverted).
  out += "\nstep-time error by system and precision:\n";
  for (const auto& g : plan::summarize(rows)) {
    out += fmt::format(
        "  {:<24} {:>3} runs  mean |error| {:>5.1f} %  max {:>5.1f} %  mean {:+.1f} %\n", g.group,
        g.runs, 100 * g.mean_abs, 100 * g.max_abs, 100 * g.mean);
  }
  return out;
}

}  // namespace mcr::cli
