#include "mcr/codesign/guidelines.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>

namespace mcr::codesign {
namespace {

std::int64_t round_up(std::int64_t x, std::int64_t m) {
  return (x + m - 1) / m * m;
}
std::int64_t round_down(std::int64_t x, std::int64_t m) {
  return x / m * m;
}

// "2^8 x 43" style factorization into a power of two and an odd part.
std::string pow2_form(std::int64_t x) {
  const std::int64_t p = pow2_divisor(x);
  return fmt::format("{} = 2^{} x {}", x, __builtin_ctzll(static_cast<unsigned long long>(p)),
                     x / p);
}

// Head counts a' that divide h with h/a' a multiple of `align`, closest to a first.
std::string head_suggestions(std::int64_t h, std::int64_t a, std::int64_t align) {
  std::vector<std::int64_t> options;
  for (std::int64_t c = 1; c <= h / align; ++c) {
    if (h % c == 0 && (h / c) % align == 0 && h / c <= 256) options.push_back(c);
  }
  std::sort(options.begin(), options.end(), [a](std::int64_t x, std::int64_t y) {
    return std::llabs(x - a) != std::llabs(y - a) ? std::llabs(x - a) < std::llabs(y - a) : x < y;
  });
  std::string s;
  for (std::size_t i = 0; i < options.size() && i < 3; ++i) {
    s += fmt::format("{}a = {} (h/a = {})", i == 0 ? "" : " or ", options[i], h / options[i]);
  }
  return s;
}

void add(std::vector<Finding>& out, const char* id, Severity sev, std::string message,
         std::string fix) {
  out.push_back({id, sev, std::move(message), std::move(fix)});
}

}  // namespace

std::string to_string(Severity s) {
  switch (s) {
    case Severity::info:
      return "info";
    case Severity::warning:
      return "warning";
    case Severity::error:
      return "error";
  }
  return "unknown";
}

bool has_finding(const std::vector<Finding>& findings, const std::string& id) {
  return std::any_of(findings.begin(), findings.end(),
                     [&id](const Finding& f) { return f.id == id; });
}

std::vector<Finding> check_guidelines(const ModelShape& m, const DeviceSpec& device,
                                      const ModelAnalysis& analysis) {
  return check_guidelines(m, device, analysis, true);
}

std::vector<Finding> check_guidelines(const ModelShape& m, const DeviceSpec& device,
                                      const ModelAnalysis& analysis, bool quantify) {
  std::vector<Finding> out;
  const std::int64_t align = device.alignment_elements(m.dtype);
  const int eb = dtype_bytes(m.dtype);
  const std::string rule = fmt::format("{} {} elements = {} B on {}", align, to_string(m.dtype),
                                       align * eb, device.name);

  // G1: v is N of the logit GEMM and K of its dgrad.
  if (m.v % align != 0) {
    add(out, "vocab_alignment", Severity::warning,
        fmt::format("vocabulary v = {} is not a multiple of {} ({}): the logit GEMM runs at a "
                    "{}-byte alignment tier",
                    m.v, align, rule, pow2_divisor(m.v) * eb),
        fmt::format("pad v to {} (= {} x {}); the extra rows are never produced by the tokenizer",
                    round_up(m.v, align), align, round_up(m.v, align) / align));
  }
  // G10: h is K or N of every dense GEMM.
  if (m.h % align != 0) {
    const std::int64_t down = round_down(m.h, align);
    const std::int64_t up = round_up(m.h, align);
    add(out, "hidden_alignment", Severity::warning,
        fmt::format("hidden size h = {} is not a multiple of {} ({})", m.h, align, rule),
        fmt::format("use h = {} or h = {} (multiples of {})", down > 0 ? down : up, up, align));
  }
  const std::int64_t d = m.head_dim();
  if (m.a * d != m.h) {
    // Only reachable with an explicit head_dim (validate() rejects h % a != 0 otherwise).
    add(out, "heads_divide_hidden", Severity::warning,
        fmt::format("attention width a x head_dim = {} x {} = {} differs from h = {}: Q and the "
                    "output projection are {} x {}, not square",
                    m.a, d, m.a * d, m.h, m.h, m.a * d),
        fmt::format("use h = {} (or a head count dividing h: {})", m.a * d,
                    head_suggestions(m.h, m.a, std::min<std::int64_t>(align, 64))));
  }
  {
    // G3/G7: the head dim is K of the score BMM and N of the attention-over-value BMM.
    const std::int64_t d_bytes = pow2_divisor(d) * eb;
    if (d % align != 0) {
      const bool flash = m.attention == AttentionImpl::flash;
      add(out, "head_dim_pow2", flash ? Severity::info : Severity::warning,
          fmt::format("head dimension {} has power-of-two content {} ({} B; the rule is {}): "
                      "the attention BMMs run at a lower alignment tier{}",
                      d, pow2_form(d), d_bytes, rule,
                      flash ? " (flash attention hides most of this)" : ""),
          fmt::format("use {}", head_suggestions(m.h, m.a, align)));
    }
  }
  // G4, (b*a)/t and a_kv over t, is a hard rule: ModelShape::validate() rejects it.
  // Sharded dims: h/t (K of attn_proj) and d_ff/t (N of mlp_up, K of mlp_down).
  if (m.t > 1) {
    for (const auto& [label, dim] : {std::pair<const char*, std::int64_t>{"h", m.h},
                                     std::pair<const char*, std::int64_t>{"d_ff", m.d_ff}}) {
      if (dim % m.t != 0 || (dim / m.t) % align != 0) {
        add(out, "tp_shard_alignment", Severity::warning,
            fmt::format("{}/t = {}/{} = {:.2f} is not a multiple of {} ({}): every rank's GEMM is "
                        "misaligned",
                        label, dim, m.t, static_cast<double>(dim) / static_cast<double>(m.t), align,
                        rule),
            fmt::format("make {} a multiple of t x {} = {} (e.g. {} = {})", label, align,
                        m.t * align, label, round_up(dim, m.t * align)));
      }
    }
  }
  // G6: SwiGLU width.
  if (m.mlp == MlpType::swiglu) {
    const std::int64_t eight_thirds = (8 * m.h) / 3;
    const bool is_convention = std::llabs(m.d_ff - eight_thirds) <= 1;
    if (m.d_ff % align != 0) {
      const std::int64_t up = round_up(m.d_ff, align);
      const std::int64_t down = round_down(m.d_ff, align);
      const std::int64_t up256 = round_up(m.d_ff, 256);
      add(out, "swiglu_dff", Severity::warning,
          fmt::format("SwiGLU d_ff = {} ({}{}) is not a multiple of {} ({}): the gate, up and down "
                      "GEMMs are misaligned",
                      m.d_ff, pow2_form(m.d_ff), is_convention ? ", the 8h/3 convention" : "",
                      align, rule),
          fmt::format("use d_ff = {} or {} (multiples of {}), or {} (multiple of 256); check "
                      "candidates with `mcr shape sweep --vary d_ff`",
                      down, up, align, up256));
    }
  }
  // G8: flash attention wants a head dim large enough to fill the tensor cores, and FA2 caps it.
  if (m.attention == AttentionImpl::flash) {
    if (d < 64) {
      add(out, "flash_head_dim", Severity::warning,
          fmt::format(
              "head dimension h/a = {} is small for flash attention: each tile reduces over "
              "only {} elements per product",
              d, d),
          fmt::format("use fewer, larger heads: {}", head_suggestions(m.h, m.a, 64)));
    } else if (d > 256) {
      add(out, "flash_head_dim", Severity::error,
          fmt::format("head dimension h/a = {} exceeds 256, the largest FlashAttention-2 supports",
                      d),
          fmt::format("use more heads: {}", head_suggestions(m.h, m.h / 256, 64)));
    }
  }
  // G5: tensor parallelism shrinks every GEMM and adds all-reduces.
  if (m.t > 8 || (m.t > 1 && m.h / m.t < 1024)) {
    add(out, "tp_size", Severity::warning,
        fmt::format("t = {} is large for h = {}: per-GPU GEMMs have h/t = {} and every layer "
                    "all-reduces {} times{}",
                    m.t, m.h, m.h / m.t, analysis.training ? 4 : 2,
                    m.t > 8 ? "; t > 8 also crosses the usual NVLink domain" : ""),
        fmt::format("use t = {} and scale with pipeline or data parallelism instead",
                    std::max<std::int64_t>(1, std::min<std::int64_t>(8, m.h / 1024))));
  }
  // s is M and N (or K) of the attention BMMs; b*s is M of every dense GEMM.
  const double tokens_factor =
      alignment_tier_factor(device.efficiency, pow2_divisor(m.b * m.s) * eb);
  if (m.s % align != 0) {
    const std::int64_t up = round_up(m.s, align);
    std::string effect = fmt::format("attention BMMs at the {}-byte tier", pow2_divisor(m.s) * eb);
    if (quantify) {
      ModelShape aligned = m;
      aligned.s = up;
      const double at_up = analyze(aligned, device, analysis.training).totals.mfu;
      effect = fmt::format("predicted MFU {:.1f}% vs {:.1f}% at s = {}", 100 * analysis.totals.mfu,
                           100 * at_up, up);
    }
    add(out, "seq_alignment", Severity::warning,
        fmt::format("sequence length s = {} is not a multiple of {} ({}): {}", m.s, align, rule,
                    effect),
        fmt::format("use s = {} or s = {} (pack or pad sequences to a multiple of {})",
                    std::max(align, round_down(m.s, align)), up, align));
  }
  if ((m.b * m.s) % align != 0) {
    const std::int64_t step_s = align / std::gcd(m.b, align);  // s' with b*s' aligned
    const std::int64_t step_b = align / std::gcd(m.s, align);  // b' with b'*s aligned
    add(out, "tokens_alignment", Severity::warning,
        fmt::format("tokens per microbatch b*s = {}*{} = {} is not a multiple of {}: M of every "
                    "dense GEMM is {}-byte aligned (x{:.2f} on each GEMM's time)",
                    m.b, m.s, m.b * m.s, align, pow2_divisor(m.b * m.s) * eb, tokens_factor),
        fmt::format("use s = {} (b*s = {}){}", round_up(m.s, step_s), m.b * round_up(m.s, step_s),
                    round_up(m.b, step_b) <= 16
                        ? fmt::format(" or b = {} (b*s = {})", round_up(m.b, step_b),
                                      round_up(m.b, step_b) * m.s)
                        : std::string()));
  }
  // G9: the tail wave of a GEMM that matters.
  for (const GemmResult& r : analysis.layer) {
    const GemmPrediction& p = r.prediction;
    if (r.gemm.pass != Pass::forward || p.memory_bound || p.latency_bound) continue;
    const double share = p.time_s / analysis.totals.time_per_layer_s;
    if (share >= 0.05 && p.waves <= 8 && p.wave_efficiency < 0.75) {
      const std::int64_t full = p.waves * device.compute_units;
      add(out, "wave_tail", Severity::warning,
          fmt::format("{} ({}x{}x{}, batch {}) fills {} of {} tile slots in {} waves on {} units "
                      "(wave efficiency {:.0f}%, {:.0f}% of layer time)",
                      r.gemm.role, r.gemm.m, r.gemm.n, r.gemm.k, r.gemm.batch, p.blocks, full,
                      p.waves, device.compute_units, 100 * p.wave_efficiency, 100 * share),
          fmt::format(
              "sit on the crest of a wave: change b, s or the sharded dimension so the "
              "{}x{} tile count reaches a multiple of {} (now {}), or see `mcr shape sweep`",
              p.tile.m, p.tile.n, device.compute_units, p.blocks));
    }
  }
  return out;
}

std::vector<Finding> check_guidelines(const ModelShape& model, const DeviceSpec& device) {
  return check_guidelines(model, device, analyze(model, device, false));
}

}  // namespace mcr::codesign
