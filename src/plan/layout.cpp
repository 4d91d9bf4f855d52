#include "mcr/plan/layout.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

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
  throw InvalidArgument(
      fmt::format("layout.recompute '{}' is not one of none, selective, full", s));
}

std::string to_string(Fp8 f) {
  switch (f) {
    case Fp8::none:
      return "none";
    case Fp8::delayed:
      return "delayed";
    case Fp8::current:
      return "current";
    case Fp8::blockwise:
      return "blockwise";
    case Fp8::mxfp8:
      return "mxfp8";
  }
  return "none";
}

Fp8 parse_fp8(const std::string& s) {
  if (s == "none") return Fp8::none;
  if (s == "delayed") return Fp8::delayed;
  if (s == "current") return Fp8::current;
  if (s == "blockwise") return Fp8::blockwise;
  if (s == "mxfp8") return Fp8::mxfp8;
  throw InvalidArgument(
      fmt::format("fp8 recipe '{}' is not one of none, delayed, current, blockwise, mxfp8", s));
}

std::string to_string(Dispatcher d) {
  return d == Dispatcher::flex ? "flex" : "alltoall";
}

Dispatcher parse_dispatcher(const std::string& s) {
  if (s == "alltoall") return Dispatcher::alltoall;
  if (s == "flex") return Dispatcher::flex;
  throw InvalidArgument(fmt::format("moe dispatcher '{}' is not one of alltoall, flex", s));
}

bool Layout::recomputes(const std::string& module) const {
  if (recompute != Recompute::selective) return false;
  if (recompute_modules.empty()) return module == "core_attn";
  return std::find(recompute_modules.begin(), recompute_modules.end(), module) !=
         recompute_modules.end();
}

int Layout::expert_replicas() const {
  const int per = expert_tp() * ep;
  return per > 0 ? tp * cp * dp / per : 0;
}

std::int64_t Layout::microbatches() const {
  const std::int64_t per = micro_batch * dp;
  return per > 0 ? global_batch / per : 0;
}

std::string describe(const Layout& l) {
  std::string s = fmt::format("tp={}", l.tp);
  if (l.cp > 1) s += fmt::format(" cp={}", l.cp);
  s += fmt::format(" pp={} dp={}", l.pp, l.dp);
  if (l.ep > 1) s += fmt::format(" ep={}", l.ep);
  if (l.ep > 1 && l.expert_tp() != l.tp) s += fmt::format(" etp={}", l.expert_tp());
  s += fmt::format(" mb={} gbs={}", l.micro_batch, l.global_batch);
  if (l.interleave > 1) s += fmt::format(" v={}", l.interleave);
  s += fmt::format(" recompute={}", to_string(l.recompute));
  if (l.sequence_parallel) s += " sp";
  if (l.zero > 0) s += fmt::format(" zero={}", l.zero);
  if (l.distributed_optimizer) s += " dist-opt";
  if (l.fp8 != Fp8::none)
    s += fmt::format(" fp8={}{}", to_string(l.fp8), l.fp8_params ? "+params" : "");
  return s;
}

namespace {

// Rules of context parallelism, expert parallelism, FP8 and the distributed optimizer. Errors name
// the fields they judge as layout.<field> and model.<term> (heads, kv_heads, ffn, layers): a
// program sees what to change, and `mcr plan` shows its flags instead (tools/mcr/field_flags.cpp).
std::string parallelism_error(const Layout& l, const codesign::ModelShape& m) {
  if (l.cp > 1) {
    if (m.s % (2 * l.cp) != 0) {
      return fmt::format(
          "layout.cp {}: the sequence s = {} must split into 2 x cp = {} equal chunks "
          "(Megatron-Core balances causal attention over two chunks per rank)",
          l.cp, m.s, 2 * l.cp);
    }
    if (m.attention != codesign::AttentionImpl::flash) {
      return fmt::format(
          "layout.cp {} needs flash (fused) attention: ring attention exchanges K and V "
          "between the steps of one fused kernel; set the model's attention to flash",
          l.cp);
    }
  }
  if (l.ep > 1 || l.etp > 0) {
    if (!m.is_moe()) {
      return fmt::format("layout.ep {} (etp = {}) needs a mixture-of-experts model (experts > 1)",
                         l.ep, l.etp);
    }
  }
  if (m.is_moe()) {
    if (m.experts % l.ep != 0) {
      return fmt::format(
          "layout.ep {} must divide the {} experts: every expert-parallel rank holds "
          "the same number of experts",
          l.ep, m.experts);
    }
    const long long shared = static_cast<long long>(l.tp) * l.cp * l.dp;
    const long long per = static_cast<long long>(l.expert_tp()) * l.ep;
    if (shared % per != 0) {
      return fmt::format(
          "layout.etp {} x layout.ep {} = {} must divide layout.tp {} x layout.cp {} x layout.dp "
          "{} = {}: the experts "
          "of a pipeline stage are laid over the same ranks as its dense layers",
          l.expert_tp(), l.ep, per, l.tp, l.cp, l.dp, shared);
    }
    if (m.expert_width() % l.expert_tp() != 0) {
      return fmt::format(
          "layout.etp {} must divide the expert width d_ff_expert = {}: the expert MLP is "
          "split over the expert-tensor-parallel ranks",
          l.expert_tp(), m.expert_width());
    }
    if (l.tp > 1 && !l.sequence_parallel) {
      return fmt::format(
          "layout.tp {} with a mixture-of-experts model needs layout.sequence_parallel "
          "(Megatron-Core routes the tokens of each sequence-parallel shard)",
          l.tp);
    }
  }
  // Sequence parallelism splits each sequence (each CP rank's share of it) into tp equal shards;
  // Megatron asserts it (a fractional shard would be priced here as if it ran).
  if (l.sequence_parallel && l.tp > 1 && (m.s / l.cp) % l.tp != 0) {
    return fmt::format(
        "layout.sequence_parallel with layout.tp {}: the sequence s = {}{} must split into tp "
        "equal shards",
        l.tp, m.s,
        l.cp > 1 ? fmt::format(" over layout.cp {} ({} per CP rank)", l.cp, m.s / l.cp)
                 : std::string());
  }
  for (const auto& module : l.recompute_modules) {
    if (module != "core_attn" && module != "layernorm" && module != "moe_act") {
      return fmt::format(
          "layout.recompute_modules has '{}': it must be one of core_attn, layernorm, "
          "moe_act",
          module);
    }
  }
  if (!l.recompute_modules.empty() && l.recompute != Recompute::selective) {
    return fmt::format("layout.recompute_modules ({}) needs layout.recompute selective",
                       fmt::join(l.recompute_modules, ", "));
  }
  if (l.tp_comm_overlap && l.tp > 1 && !l.sequence_parallel) {
    return fmt::format(
        "layout.tp_comm_overlap with layout.tp {} needs layout.sequence_parallel: the overlap "
        "pipelines the all-gathers and reduce-scatters of sequence parallelism with their GEMMs "
        "(Megatron refuses it without)",
        l.tp);
  }
  if (l.distributed_optimizer && l.zero != 0) {
    return fmt::format(
        "layout.distributed_optimizer and layout.zero {}: the distributed optimizer is "
        "Megatron's form of ZeRO stage 1; give one of them",
        l.zero);
  }
  // A model of dtype fp8 implies the delayed recipe when the layout names none (plan_step).
  if (l.fp8_params && l.fp8 == Fp8::none && m.dtype != codesign::DType::fp8) {
    return "layout.fp8_params needs an FP8 recipe (layout.fp8 delayed, current, blockwise or "
           "mxfp8, or model dtype fp8)";
  }
  return {};
}

}  // namespace

std::string layout_error(const Layout& l, const codesign::ModelShape& m, const SystemSpec& sys) {
  if (l.tp < 1) return fmt::format("layout.tp {} must be >= 1", l.tp);
  if (l.pp < 1) return fmt::format("layout.pp {} must be >= 1", l.pp);
  if (l.dp < 1) return fmt::format("layout.dp {} must be >= 1", l.dp);
  if (l.micro_batch < 1) return fmt::format("layout.micro_batch {} must be >= 1", l.micro_batch);
  if (l.interleave < 1) return fmt::format("layout.interleave {} must be >= 1", l.interleave);
  if (l.zero < 0 || l.zero > 3) return fmt::format("layout.zero {} must be 0, 1, 2 or 3", l.zero);
  if (l.cp < 1) return fmt::format("layout.cp {} must be >= 1", l.cp);
  if (l.ep < 1) return fmt::format("layout.ep {} must be >= 1", l.ep);
  if (l.etp < 0) return fmt::format("layout.etp {} must be >= 0 (0: tp)", l.etp);
  if (!(l.capacity_factor >= 0 && std::isfinite(l.capacity_factor))) {
    return fmt::format("layout.capacity_factor {} must be finite and >= 0 (0: dropless)",
                       l.capacity_factor);
  }
  if (l.gpus > sys.total_gpus()) {
    return fmt::format("layout.gpus {} exceeds system '{}': {} nodes x {} GPUs = {}", l.gpus,
                       sys.name, sys.nodes, sys.gpus_per_node, sys.total_gpus());
  }
  // Each factor is at least 1, so none exceeds the product; bounding each by the system first keeps
  // the product within 64 bits (it wrapped to 0 for tp·cp·pp·dp = 2^64).
  for (const auto& [name, value] :
       {std::pair{"tp", l.tp}, {"cp", l.cp}, {"pp", l.pp}, {"dp", l.dp}}) {
    if (value > sys.total_gpus()) {
      return fmt::format("layout.{} {} exceeds system '{}': {} nodes x {} GPUs = {}", name, value,
                         sys.name, sys.nodes, sys.gpus_per_node, sys.total_gpus());
    }
  }
  const auto product = static_cast<long long>(l.tp) * l.cp * l.pp * l.dp;
  if (product != l.gpus) {
    if (l.cp == 1) {
      return fmt::format(
          "layout.tp {} x layout.pp {} x layout.dp {} = {} GPUs, but layout.gpus is {}: tp*pp*dp "
          "must equal gpus",
          l.tp, l.pp, l.dp, product, l.gpus);
    }
    return fmt::format(
        "layout.tp {} x layout.cp {} x layout.pp {} x layout.dp {} = {} GPUs, but layout.gpus is "
        "{}: "
        "tp*cp*pp*dp must equal gpus",
        l.tp, l.cp, l.pp, l.dp, product, l.gpus);
  }
  const int g = sys.gpus_per_node;
  if (l.tp > g && !l.allow_tp_across_nodes) {
    return fmt::format(
        "layout.tp {} is larger than a node of system '{}' ({} GPUs): tensor parallelism across "
        "nodes "
        "is slow; set layout.allow_tp_across_nodes to plan it anyway",
        l.tp, sys.name, g);
  }
  if ((l.tp <= g && g % l.tp != 0) || (l.tp > g && l.tp % g != 0)) {
    return fmt::format(
        "layout.tp {} and {} GPUs per node: a TP group must divide a node or span whole nodes",
        l.tp, g);
  }
  if (m.a % l.tp != 0) {
    return fmt::format(
        "model.heads {} is not divisible by layout.tp {}: each TP rank needs whole heads", m.a,
        l.tp);
  }
  if (m.kv_heads() % l.tp != 0) {
    return fmt::format(
        "model.kv_heads {} is not divisible by layout.tp {}: each TP rank needs whole key/value "
        "heads",
        m.kv_heads(), l.tp);
  }
  if (m.d_ff % l.tp != 0) {
    return fmt::format(
        "model.ffn {} is not divisible by layout.tp {}: the MLP is split over TP ranks", m.d_ff,
        l.tp);
  }
  if (l.uneven_pipeline && m.L < static_cast<std::int64_t>(l.pp) * l.interleave) {
    return fmt::format(
        "layout.uneven_pipeline: model.layers {} must be at least layout.pp {} x layout.interleave "
        "{} = {}: "
        "every model chunk needs a layer",
        m.L, l.pp, l.interleave, l.pp * l.interleave);
  }
  if (!l.uneven_pipeline && m.L % (static_cast<std::int64_t>(l.pp) * l.interleave) != 0) {
    return fmt::format(
        "model.layers {} is not divisible by layout.pp {} x layout.interleave {} = {}: every model "
        "chunk needs "
        "the same number of layers",
        m.L, l.pp, l.interleave, l.pp * l.interleave);
  }
  if (l.global_batch < 1) {
    return fmt::format("layout.global_batch {} must be >= 1 (sequences per step)", l.global_batch);
  }
  if (l.micro_batch > l.global_batch / l.dp) {  // also keeps micro_batch x dp within 64 bits
    return fmt::format(
        "layout.micro_batch {} x layout.dp {} exceeds layout.global_batch {}: every replica runs "
        "at least one whole microbatch",
        l.micro_batch, l.dp, l.global_batch);
  }
  if (l.global_batch % (l.micro_batch * l.dp) != 0) {
    return fmt::format(
        "layout.global_batch {} is not divisible by layout.micro_batch {} x layout.dp {} = {}: "
        "every replica runs "
        "whole microbatches",
        l.global_batch, l.micro_batch, l.dp, l.micro_batch * l.dp);
  }
  if (l.interleave > 1 && l.pp == 1) {
    return fmt::format("layout.interleave {} needs pipeline parallelism (layout.pp > 1)",
                       l.interleave);
  }
  if (l.interleave > 1 && l.microbatches() % l.pp != 0) {
    return fmt::format(
        "layout.interleave {}: the {} microbatches (global batch {} / (micro-batch {} x dp {})) "
        "are not "
        "a multiple of layout.pp {}, which the interleaved schedule requires",
        l.interleave, l.microbatches(), l.global_batch, l.micro_batch, l.dp, l.pp);
  }
  if (l.zero >= 2 && l.pp > 1) {
    return fmt::format(
        "layout.zero {} with layout.pp {}: ZeRO stages 2 and 3 shard gradients per microbatch and "
        "do not "
        "combine with pipeline parallelism; use layout.zero 0 or 1",
        l.zero, l.pp);
  }
  return parallelism_error(l, m);
}

Layout resolve_layout(Layout l, const codesign::ModelShape& m, const SystemSpec& sys) {
  if (l.tp < 1) throw InvalidArgument(fmt::format("layout.tp {} must be >= 1", l.tp));
  if (l.pp < 1) throw InvalidArgument(fmt::format("layout.pp {} must be >= 1", l.pp));
  if (l.gpus < 0) {
    throw InvalidArgument(fmt::format(
        "layout.gpus {} must be >= 1, or 0 for tp x cp x pp x dp (every GPU of the system "
        "without dp)",
        l.gpus));
  }
  if (l.dp < 0) {
    throw InvalidArgument(fmt::format(
        "layout.dp {} must be >= 1, or 0 for what tp x cp x pp leave of the GPUs", l.dp));
  }
  if (l.cp < 1) throw InvalidArgument(fmt::format("layout.cp {} must be >= 1", l.cp));
  if (l.micro_batch < 1) {
    throw InvalidArgument(fmt::format("layout.micro_batch {} must be >= 1", l.micro_batch));
  }
  // In 64 bits, and bounded by the system before the next factor, so that no product wraps.
  const long long total = sys.total_gpus();
  long long model_parallel = 1;
  for (const int factor : {l.tp, l.cp, l.pp, std::max(l.dp, 1)}) {
    model_parallel *= factor;
    if (model_parallel > total) {
      throw InvalidArgument(fmt::format(
          "layout.tp {} x layout.cp {} x layout.pp {}{} needs more than the {} GPUs of system "
          "'{}'",
          l.tp, l.cp, l.pp, l.dp > 0 ? fmt::format(" x layout.dp {}", l.dp) : std::string(), total,
          sys.name));
    }
  }
  if (l.dp > 0) model_parallel /= l.dp;
  if (l.gpus == 0) l.gpus = static_cast<int>(l.dp > 0 ? model_parallel * l.dp : total);
  if (l.dp == 0) {
    if (l.gpus % model_parallel != 0) {
      if (l.cp == 1) {
        throw InvalidArgument(
            fmt::format("layout.gpus {} is not divisible by layout.tp {} x layout.pp {} = {}: the "
                        "data-parallel size must be "
                        "whole",
                        l.gpus, l.tp, l.pp, l.tp * l.pp));
      }
      throw InvalidArgument(fmt::format(
          "layout.gpus {} is not divisible by layout.tp {} x layout.cp {} x layout.pp {} = {}: the "
          "data-parallel size "
          "must be whole",
          l.gpus, l.tp, l.cp, l.pp, model_parallel));
    }
    l.dp = static_cast<int>(l.gpus / model_parallel);
  }
  if (l.global_batch == 0) {
    if (__builtin_mul_overflow(l.micro_batch, std::int64_t{l.dp}, &l.global_batch)) {
      throw InvalidArgument(fmt::format(
          "layout.micro_batch {} x layout.dp {}, the default global batch, does not fit in 64 "
          "bits",
          l.micro_batch, l.dp));
    }
  }
  if (auto e = layout_error(l, m, sys); !e.empty()) throw InvalidArgument(e);
  return l;
}

}  // namespace mcr::plan
