// Does the model fit? The memory calculators' per-GPU estimate against the device's memory, with
// the layout changes that would make it fit, so the warning says what to do.
#include <fmt/core.h>

#include <cmath>

#include "mcr/codesign/guidelines.hpp"

namespace mcr::codesign {
namespace {

double gib(double bytes) {
  return bytes / (1024.0 * 1024.0 * 1024.0);
}

MemoryEstimate estimate(const ModelShape& m, const ParallelLayout& l, bool training) {
  return training ? training_memory(m, l) : inference_memory(m, l);
}

}  // namespace

std::vector<Finding> check_memory(const ModelShape& model, const DeviceSpec& device,
                                  const ParallelLayout& layout, bool training) {
  std::vector<Finding> out;
  if (!(device.memory_gb > 0)) return out;
  // Catalog capacities are marketed in GB but are binary (an "80GB" A100 has 80 GiB), as the
  // planner reads them (src/plan/memory.cpp). Leave room for the framework, the CUDA context and
  // fragmentation.
  const double capacity = device.memory_gb * 1024.0 * 1024.0 * 1024.0;
  const double usable = 0.9 * capacity;
  const MemoryEstimate e = estimate(model, layout, training);
  if (e.total <= usable) return out;

  // Layout changes that fit, cheapest first: recomputation, ZeRO over the data-parallel ranks,
  // then pipeline stages (powers of two up to L).
  std::vector<std::string> fits;
  if (training && !layout.checkpoint_activations) {
    ParallelLayout l = layout;
    l.checkpoint_activations = true;
    if (estimate(model, l, training).total <= usable) fits.push_back("--checkpoint-activations");
  }
  if (training && layout.zero_stage < 3) {
    for (std::int64_t dp : {8, 16, 32, 64, 128, 256, 512}) {
      ParallelLayout l = layout;
      l.zero_stage = 3;
      l.dp = std::max(dp, layout.dp);
      l.checkpoint_activations = true;
      if (estimate(model, l, training).total <= usable) {
        fits.push_back(fmt::format("--zero 3 --dp {} --checkpoint-activations", l.dp));
        break;
      }
    }
  }
  for (std::int64_t pp = 2; pp <= model.L; pp *= 2) {
    ParallelLayout l = layout;
    l.pp = std::max(pp, layout.pp);
    l.checkpoint_activations = training;
    if (estimate(model, l, training).total <= usable) {
      fits.push_back(fmt::format("--pp {}{}", l.pp, training ? " --checkpoint-activations" : ""));
      break;
    }
  }
  std::string fix;
  for (const auto& f : fits)
    fix += (fix.empty() ? "" : "; or ") + f;
  if (fix.empty()) fix = "shard further: no single layout change tried here fits";
  const std::string message = fmt::format(
      "{} needs {:.1f} GiB per GPU (weights {:.1f}, gradients {:.1f}, optimizer {:.1f}, "
      "activations {:.1f}, KV cache {:.1f}) but {} has {:.0f} GB (binary: {:.1f} GiB; 90% "
      "usable: {:.1f} GiB)",
      training ? "training" : "inference", gib(e.total), gib(e.weights), gib(e.gradients),
      gib(e.optimizer), gib(e.activations), gib(e.kv_cache), device.name, device.memory_gb,
      gib(capacity), gib(usable));
  out.push_back(
      {"memory_fit", Severity::warning, message, fmt::format("with t = {}: {}", model.t, fix)});
  return out;
}

}  // namespace mcr::codesign
