#include "mcr/plan/layout.hpp"

#include <fmt/core.h>

#include "mcr/errors.hpp"

namespace mcr::plan {

std::string to_string(Recompute r) {
  switch (r) {
    case Recompute::none:
      return "none";
    case Recompute::selective:
      return "selective";
    case Recompute::full:
      return "full";
  }
  return "none";
}

Recompute parse_recompute(const std::string& s) {
  if (s == "none") return Recompute::none;
  if (s == "selective") return Recompute::selective;
  if (s == "full") return Recompute::full;
  throw InvalidArgument(fmt::format("--recompute '{}' is not one of none, selective, full", s));
}

std::int64_t Layout::microbatches() const {
  const std::int64_t per = micro_batch * dp;
  return per > 0 ? global_batch / per : 0;
}

std::string describe(const Layout& l) {
  std::string s = fmt::format("tp={} pp={} dp={} mb={} gbs={}", l.tp, l.pp, l.dp, l.micro_batch,
                              l.global_batch);
  if (l.interleave > 1) s += fmt::format(" v={}", l.interleave);
  s += fmt::format(" recompute={}", to_string(l.recompute));
  if (l.sequence_parallel) s += " sp";
  if (l.zero > 0) s += fmt::format(" zero={}", l.zero);
  return s;
}

std::string layout_error(const Layout& l, const codesign::ModelShape& m, const SystemSpec& sys) {
  if (l.tp < 1) return fmt::format("--tp {} must be >= 1", l.tp);
  if (l.pp < 1) return fmt::format("--pp {} must be >= 1", l.pp);
  if (l.dp < 1) return fmt::format("--dp {} must be >= 1", l.dp);
  if (l.micro_batch < 1) return fmt::format("--micro-batch {} must be >= 1", l.micro_batch);
  if (l.interleave < 1) return fmt::format("--interleave {} must be >= 1", l.interleave);
  if (l.zero < 0 || l.zero > 3) return fmt::format("--zero {} must be 0, 1, 2 or 3", l.zero);
  const long long product = static_cast<long long>(l.tp) * l.pp * l.dp;
  if (product != l.gpus) {
    return fmt::format(
        "--tp {} x --pp {} x --dp {} = {} GPUs, but --gpus is {}: tp*pp*dp must equal gpus", l.tp,
        l.pp, l.dp, product, l.gpus);
  }
  if (l.gpus > sys.total_gpus()) {
    return fmt::format("--gpus {} exceeds system '{}': {} nodes x {} GPUs = {}", l.gpus, sys.name,
                       sys.nodes, sys.gpus_per_node, sys.total_gpus());
  }
  const int g = sys.gpus_per_node;
  if (l.tp > g && !l.allow_tp_across_nodes) {
    return fmt::format(
        "--tp {} is larger than a node of system '{}' ({} GPUs): tensor parallelism across nodes "
        "is slow; pass --allow-tp-across-nodes to plan it anyway",
        l.tp, sys.name, g);
  }
  if ((l.tp <= g && g % l.tp != 0) || (l.tp > g && l.tp % g != 0)) {
    return fmt::format(
        "--tp {} and {} GPUs per node: a TP group must divide a node or span whole nodes", l.tp, g);
  }
  if (m.a % l.tp != 0) {
    return fmt::format("--heads {} is not divisible by --tp {}: each TP rank needs whole heads",
                       m.a, l.tp);
  }
  if (m.kv_heads() % l.tp != 0) {
    return fmt::format(
        "--kv-heads {} is not divisible by --tp {}: each TP rank needs whole key/value heads",
        m.kv_heads(), l.tp);
  }
  if (m.d_ff % l.tp != 0) {
    return fmt::format("--ffn {} is not divisible by --tp {}: the MLP is split over TP ranks",
                       m.d_ff, l.tp);
  }
  if (m.L % (static_cast<std::int64_t>(l.pp) * l.interleave) != 0) {
    return fmt::format(
        "--layers {} is not divisible by --pp {} x --interleave {} = {}: every model chunk needs "
        "the same number of layers",
        m.L, l.pp, l.interleave, l.pp * l.interleave);
  }
  if (l.global_batch < 1 || l.global_batch % (l.micro_batch * l.dp) != 0) {
    return fmt::format(
        "--global-batch {} is not divisible by --micro-batch {} x --dp {} = {}: every replica runs "
        "whole microbatches",
        l.global_batch, l.micro_batch, l.dp, l.micro_batch * l.dp);
  }
  if (l.interleave > 1 && l.pp == 1) {
    return fmt::format("--interleave {} needs pipeline parallelism (--pp > 1)", l.interleave);
  }
  if (l.interleave > 1 && l.microbatches() % l.pp != 0) {
    return fmt::format(
        "--interleave {}: the {} microbatches (global batch {} / (micro-batch {} x dp {})) are not "
        "a multiple of --pp {}, which the interleaved schedule requires",
        l.interleave, l.microbatches(), l.global_batch, l.micro_batch, l.dp, l.pp);
  }
  if (l.zero >= 2 && l.pp > 1) {
    return fmt::format(
        "--zero {} with --pp {}: ZeRO stages 2 and 3 shard gradients per microbatch and do not "
        "combine with pipeline parallelism; use --zero 0 or 1",
        l.zero, l.pp);
  }
  return {};
}

Layout resolve_layout(Layout l, const codesign::ModelShape& m, const SystemSpec& sys) {
  if (l.tp < 1) throw InvalidArgument(fmt::format("--tp {} must be >= 1", l.tp));
  if (l.pp < 1) throw InvalidArgument(fmt::format("--pp {} must be >= 1", l.pp));
  if (l.gpus < 0) throw InvalidArgument(fmt::format("--gpus {} must be >= 1", l.gpus));
  if (l.dp < 0) throw InvalidArgument(fmt::format("--dp {} must be >= 1", l.dp));
  if (l.gpus == 0) l.gpus = l.dp > 0 ? l.tp * l.pp * l.dp : sys.total_gpus();
  if (l.dp == 0) {
    if (l.gpus % (l.tp * l.pp) != 0) {
      throw InvalidArgument(fmt::format(
          "--gpus {} is not divisible by --tp {} x --pp {} = {}: the data-parallel size must be "
          "whole",
          l.gpus, l.tp, l.pp, l.tp * l.pp));
    }
    l.dp = l.gpus / (l.tp * l.pp);
  }
  if (l.global_batch == 0) l.global_batch = l.micro_batch * l.dp;
  if (auto e = layout_error(l, m, sys); !e.empty()) throw InvalidArgument(e);
  return l;
}

}  // namespace mcr::plan
