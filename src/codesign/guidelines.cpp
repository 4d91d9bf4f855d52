#include "mcr/codesign/guidelines.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string_view>
#include <utility>
#include <vector>

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

// Head counts a' that divide h with h/a' a multiple of `align`, closest to `a` first, among those
// the model can take: t divides a', and the GQA group size a/a_kv is kept with t and the new a_kv
// dividing one way or the other (multi-query stays multi-query), as ModelShape::validate() asks.
std::string head_suggestions(const ModelShape& m, std::int64_t a, std::int64_t align) {
  const std::int64_t h = m.h;
  const auto shardable = [&](std::int64_t c) {
    const std::int64_t kv = kv_heads_keeping_group(m, c);
    return kv > 0 && tp_splits_heads(c, kv, m.t);
  };
  std::vector<std::int64_t> options;
  for (std::int64_t c = 1; c <= h / align; ++c) {
    if (h % c == 0 && (h / c) % align == 0 && h / c <= 256 && shardable(c)) options.push_back(c);
  }
  std::sort(options.begin(), options.end(), [a](std::int64_t x, std::int64_t y) {
    return std::llabs(x - a) != std::llabs(y - a) ? std::llabs(x - a) < std::llabs(y - a) : x < y;
  });
  std::string s;
  for (std::size_t i = 0; i < options.size() && i < 3; ++i) {
    s += fmt::format("{}a = {} (h/a = {})", i == 0 ? "" : " or ", options[i], h / options[i]);
  }
  if (s.empty()) s = fmt::format("a head count dividing h = {} (none fits t = {} here)", h, m.t);
  return s;
}

// The tensor-parallel size to suggest instead of a large one: at most 8 (one NVLink domain) and
// h/1024, and one that splits the heads (and KV heads) evenly, as the model requires of t.
std::int64_t smaller_tp(const ModelShape& m) {
  std::int64_t t = std::max<std::int64_t>(1, std::min<std::int64_t>(8, m.h / 1024));
  while (t > 1 && !tp_splits_heads(m.a, m.kv_heads(), t))
    --t;
  return t;
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

  // G1: v/t (vocabulary-parallel logits: each rank computes ceil(v/t) of them) is N of the logit
  // GEMM and K of its dgrad; Megatron pads v to a multiple of t times its divisor for this reason.
  const std::int64_t v_shard = (m.v + m.t - 1) / m.t;
  if (v_shard % align != 0 || m.v % m.t != 0) {
    const std::int64_t padded = round_up(m.v, align * m.t);
    const std::string what =
        m.t > 1 ? fmt::format("vocabulary v = {} over t = {} ranks (ceil(v/t) = {} logits each{})",
                              m.v, m.t, v_shard, m.v % m.t != 0 ? ", uneven" : "")
                : fmt::format("vocabulary v = {}", m.v);
    add(out, "vocab_alignment", Severity::warning,
        fmt::format("{} is not a multiple of {} ({}): the logit GEMM runs at a {}-byte alignment "
                    "tier",
                    what, align, rule, pow2_divisor(v_shard) * eb),
        fmt::format("pad v to {} (= {}{} x {}); the extra rows are never produced by the tokenizer",
                    padded, m.t > 1 ? fmt::format("t x {} = ", align) : std::string(), align * m.t,
                    padded / (align * m.t)));
  }
  // G10: h is K or N of every dense GEMM.
  if (m.h % align != 0) {
    // Without an explicit head_dim the heads split h (validate() asks h % a = 0, latent attention
    // too): the suggestions stay multiples of a as well.
    const std::int64_t step = m.d_head > 0 ? align : std::lcm(align, m.a);
    const std::int64_t down = round_down(m.h, step);
    const std::int64_t up = round_up(m.h, step);
    add(out, "hidden_alignment", Severity::warning,
        fmt::format("hidden size h = {} is not a multiple of {} ({})", m.h, align, rule),
        fmt::format(
            "use {} (multiples of {}{})",
            down > 0 ? fmt::format("h = {} or h = {}", down, up) : fmt::format("h = {}", up), step,
            step != align ? fmt::format(", which a = {} divides", m.a) : std::string()));
  }
  // Latent attention (DeepSeek-V2/V3) sets its per-head widths itself: Q/K qk_nope + qk_rope,
  // V v_head_dim; h/a is no width of it, and its projections are not square by design.
  const std::int64_t d_qk = m.qk_head_dim();
  const std::int64_t d_v = m.v_dim();
  const auto head_fix = [&](std::int64_t a, std::int64_t to_align) {
    return m.is_mla() ? fmt::format(
                            "make qk_nope_dim + qk_rope_dim = {} and v_head_dim = {} "
                            "multiples of {}",
                            d_qk, d_v, to_align)
                      : head_suggestions(m, a, to_align);
  };
  const std::int64_t d = m.head_dim();
  if (!m.is_mla() && m.a * d != m.h) {
    // Only reachable with an explicit head_dim (validate() rejects h % a != 0 otherwise).
    add(out, "heads_divide_hidden", Severity::warning,
        fmt::format("attention width a x head_dim = {} x {} = {} differs from h = {}: Q and the "
                    "output projection are {} x {}, not square",
                    m.a, d, m.a * d, m.h, m.h, m.a * d),
        fmt::format("use h = {} (or a head count dividing h: {})", m.a * d,
                    head_suggestions(m, m.a, std::min<std::int64_t>(align, 64))));
  }
  {
    // G3/G7: the Q/K head width is K of the score BMM, the V head width N of the
    // attention-over-value BMM.
    std::vector<std::pair<const char*, std::int64_t>> widths{{"head dimension", d_qk}};
    if (d_v != d_qk) widths = {{"query/key head dimension", d_qk}, {"value head dimension", d_v}};
    for (const auto& [label, width] : widths) {
      if (width % align == 0) continue;
      const bool flash = m.attention == AttentionImpl::flash;
      add(out, "head_dim_pow2", flash ? Severity::info : Severity::warning,
          fmt::format("{} {} has power-of-two content {} ({} B; the rule is {}): "
                      "the attention BMMs run at a lower alignment tier{}",
                      label, width, pow2_form(width), pow2_divisor(width) * eb, rule,
                      flash ? " (flash attention hides most of this)" : ""),
          fmt::format("use {}", head_fix(m.a, align)));
    }
  }
  // G4, (b*a)/t and a_kv over t, is a hard rule: ModelShape::validate() rejects it.
  // The MLP widths the layers use: the dense MLP's (unless every layer is an MoE layer), each
  // routed expert's and the shared experts'.
  std::vector<std::pair<const char*, std::int64_t>> mlp_widths;
  if (!m.is_moe() || m.dense_layers > 0) mlp_widths.push_back({"d_ff", m.d_ff});
  if (m.is_moe() && (m.d_ff_expert > 0 || mlp_widths.empty())) {
    mlp_widths.push_back({m.d_ff_expert > 0 ? "d_ff_expert" : "d_ff", m.expert_width()});
  }
  if (m.is_moe() && m.d_ff_shared > 0) mlp_widths.push_back({"d_ff_shared", m.d_ff_shared});
  // Sharded dims: the attention width / t (K of attn_proj: a x the V head width, which is h only
  // where the heads split h) and each MLP width / t (N of the up GEMM, K of the down). With an
  // explicit head width (or MLA) h/t is no GEMM's dimension: it was flagged though every GEMM was
  // aligned (gpt-oss-20b at t = 2), and a misaligned attention width went unflagged.
  if (m.t > 1) {
    const bool heads_split_h = m.d_head == 0 && !m.is_mla();
    std::vector<std::pair<const char*, std::int64_t>> sharded{
        heads_split_h ? std::pair<const char*, std::int64_t>{"h", m.h}
                      : std::pair<const char*, std::int64_t>{
                            m.is_mla() ? "a x v_head_dim" : "a x head_dim", m.a * m.v_dim()}};
    sharded.insert(sharded.end(), mlp_widths.begin(), mlp_widths.end());
    for (const auto& [label, dim] : sharded) {
      if (dim % m.t != 0 || (dim / m.t) % align != 0) {
        if (std::string_view(label).starts_with("a x ")) {
          add(out, "tp_shard_alignment", Severity::warning,
              fmt::format("{}/t = {}/{} = {:.2f} (K of the attention output projection) is not a "
                          "multiple of {} ({}): every rank's GEMM is misaligned",
                          label, dim, m.t, static_cast<double>(dim) / static_cast<double>(m.t),
                          align, rule),
              fmt::format("make {} a multiple of t x {} = {} (the head width or the head count)",
                          label, align, m.t * align));
          continue;
        }
        // A suggested h stays a multiple of a when the heads split it (as for hidden_alignment).
        const bool heads_split = dim == m.h && std::string_view(label) == "h" && m.d_head == 0;
        const std::int64_t step = heads_split ? std::lcm(m.t * align, m.a) : m.t * align;
        add(out, "tp_shard_alignment", Severity::warning,
            fmt::format("{}/t = {}/{} = {:.2f} is not a multiple of {} ({}): every rank's GEMM is "
                        "misaligned",
                        label, dim, m.t, static_cast<double>(dim) / static_cast<double>(m.t), align,
                        rule),
            fmt::format(
                "make {} a multiple of t x {} = {}{} (e.g. {} = {})", label, align, m.t * align,
                step != m.t * align ? fmt::format(" and of a = {}: {}", m.a, step) : std::string(),
                label, round_up(dim, step)));
      }
    }
  }
  // G6: SwiGLU width, of every MLP the layers use.
  if (m.mlp == MlpType::swiglu) {
    for (const auto& [label, width] : mlp_widths) {
      if (width % align == 0) continue;
      const bool is_convention = std::llabs(width - (8 * m.h) / 3) <= 1;
      // Under tensor parallelism each rank's shard must be aligned too (tp_shard_alignment):
      // the suggestions are multiples of t x the alignment, so that taking one clears both.
      const std::int64_t step = align * m.t;
      const std::int64_t up = round_up(width, step);
      const std::int64_t down = round_down(width, step);
      const std::int64_t up256 = round_up(width, std::lcm<std::int64_t>(256, step));
      add(out, "swiglu_dff", Severity::warning,
          fmt::format("SwiGLU {} = {} ({}{}) is not a multiple of {} ({}): the gate, up and down "
                      "GEMMs are misaligned",
                      label, width, pow2_form(width), is_convention ? ", the 8h/3 convention" : "",
                      align, rule),
          fmt::format("use {} = {} or {} (multiples of {}), or {} (multiple of {}){}", label,
                      down > 0 ? down : up, up, step, up256, std::lcm<std::int64_t>(256, step),
                      std::string_view(label) == "d_ff"
                          ? "; check candidates with `mcr shape sweep --vary d_ff`"
                          : ""));
    }
  }
  // The same for any other MLP without tensor parallelism (with it, tp_shard_alignment checks the
  // widths): a GeLU or GeGLU width off the rule went unflagged at t = 1, its GEMMs at a lower tier.
  if (m.mlp != MlpType::swiglu && m.t == 1) {
    for (const auto& [label, width] : mlp_widths) {
      if (width % align == 0) continue;
      const std::int64_t up = round_up(width, align);
      const std::int64_t down = round_down(width, align);
      add(out, "mlp_alignment", Severity::warning,
          fmt::format("{} = {} ({}) is not a multiple of {} ({}): the MLP's GEMMs are misaligned",
                      label, width, pow2_form(width), align, rule),
          fmt::format("use {} = {} or {} (multiples of {}){}", label, down > 0 ? down : up, up,
                      align,
                      std::string_view(label) == "d_ff"
                          ? "; check candidates with `mcr shape sweep --vary d_ff`"
                          : ""));
    }
  }
  // G8: flash attention wants a head dim large enough to fill the tensor cores (the score
  // product reduces over the Q/K width), and FA2 caps both widths.
  if (m.attention == AttentionImpl::flash) {
    const std::int64_t widest = std::max(d_qk, d_v);
    if (d_qk < 64) {
      add(out, "flash_head_dim", Severity::warning,
          fmt::format("head dimension {} is small for flash attention: each tile reduces over "
                      "only {} elements per product",
                      d_qk, d_qk),
          fmt::format("use fewer, larger heads: {}", head_fix(m.a, 64)));
    } else if (widest > 256) {
      add(out, "flash_head_dim", Severity::error,
          fmt::format("head dimension {} exceeds 256, the largest FlashAttention-2 supports",
                      widest),
          fmt::format("use more heads: {}", head_fix(std::max<std::int64_t>(1, m.h / 256), 64)));
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
                    smaller_tp(m)));
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
