#include "mcr/codesign/model.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>

#include "json_util.hpp"
#include "mcr/codesign/analysis.hpp"
#include "mcr/codesign/paths.hpp"
#include "mcr/errors.hpp"

namespace mcr::codesign {
namespace {

// How far the error messages' divisor searches look: a message about a mistyped size must come
// at once, and a size of 10^12 would otherwise take hours of trial division.
constexpr std::int64_t kDivisorSearch = std::int64_t{1} << 20;

// "1, 2, 4, 8, 16, 32": the divisors of x up to `limit` (0 = all), for error messages; past
// kDivisorSearch the list ends in "...".
std::string divisor_list(std::int64_t x, std::int64_t limit = 0) {
  const std::int64_t last = std::min(limit == 0 ? x : std::min(limit, x), kDivisorSearch);
  std::string s;
  for (std::int64_t d = 1; d <= last; ++d) {
    if (x % d == 0) s += fmt::format("{}{}", s.empty() ? "" : ", ", d);
  }
  if (last == kDivisorSearch && last < x && (limit == 0 || limit > last)) s += ", ...";
  return s;
}

// The head counts dividing h closest to a (at most two, one each side, each within kDivisorSearch
// of a).
std::string nearest_divisors(std::int64_t h, std::int64_t a) {
  std::optional<std::int64_t> below, above;
  for (std::int64_t d = a; d >= 1 && a - d <= kDivisorSearch; --d) {
    if (h % d == 0) {
      below = d;
      break;
    }
  }
  for (std::int64_t d = a; d <= h && d - a <= kDivisorSearch; ++d) {
    if (h % d == 0) {
      above = d;
      break;
    }
  }
  const auto named = [h](std::int64_t d) { return fmt::format("a = {} (h/a = {})", d, h / d); };
  if (below && above && *below != *above) return named(*below) + " or " + named(*above);
  if (below || above) return named(below ? *below : *above);
  return "none within " + std::to_string(kDivisorSearch) + " of a";
}

// Whether the model's query heads form whole groups over its KV heads (a_kv divides a), as in a
// validated model; a model read but not yet validated may not.
bool groups_evenly(const ModelShape& m) {
  return m.a > 0 && m.kv_heads() > 0 && m.kv_heads() <= m.a && m.a % m.kv_heads() == 0;
}

}  // namespace

using detail::optional;
using detail::required;
using nlohmann::json;

std::string to_string(MlpType v) {
  switch (v) {
    case MlpType::gelu:
      return "gelu";
    case MlpType::swiglu:
      return "swiglu";
    case MlpType::geglu:
      return "geglu";
  }
  return "unknown";
}
std::string to_string(AttentionImpl v) {
  return v == AttentionImpl::unfused ? "unfused" : "flash";
}
std::string to_string(NormType v) {
  return v == NormType::layernorm ? "layernorm" : "rmsnorm";
}
std::string to_string(PositionEmbedding v) {
  switch (v) {
    case PositionEmbedding::learned:
      return "learned";
    case PositionEmbedding::rotary:
      return "rotary";
    case PositionEmbedding::alibi:
      return "alibi";
  }
  return "unknown";
}

MlpType parse_mlp_type(const std::string& s) {
  if (s == "gelu") return MlpType::gelu;
  if (s == "swiglu") return MlpType::swiglu;
  if (s == "geglu") return MlpType::geglu;
  throw InvalidArgument(fmt::format("mlp type '{}' is not known: use gelu, swiglu or geglu", s));
}
AttentionImpl parse_attention_impl(const std::string& s) {
  if (s == "unfused" || s == "bmm") return AttentionImpl::unfused;
  if (s == "flash") return AttentionImpl::flash;
  throw InvalidArgument(
      fmt::format("attention implementation '{}' is not known: use unfused (or bmm) or flash", s));
}
NormType parse_norm_type(const std::string& s) {
  if (s == "layernorm") return NormType::layernorm;
  if (s == "rmsnorm") return NormType::rmsnorm;
  throw InvalidArgument(fmt::format("norm '{}' is not known: use layernorm or rmsnorm", s));
}
PositionEmbedding parse_position_embedding(const std::string& s) {
  if (s == "learned") return PositionEmbedding::learned;
  if (s == "rotary" || s == "rope" || s == "none") return PositionEmbedding::rotary;
  if (s == "alibi") return PositionEmbedding::alibi;
  throw InvalidArgument(
      fmt::format("position embedding '{}' is not known: use learned, rotary or alibi", s));
}

void ModelShape::validate() const {
  const std::string ctx = name.empty() ? std::string("model") : fmt::format("model '{}'", name);
  const auto positive = [&ctx](const char* field, std::int64_t value) {
    if (value <= 0) {
      throw InvalidArgument(
          fmt::format("{}: {} = {} must be a positive integer", ctx, field, value));
    }
  };
  const auto non_negative = [&ctx](const char* field, std::int64_t value) {
    if (value < 0) {
      throw InvalidArgument(fmt::format("{}: {} = {} must be >= 0", ctx, field, value));
    }
  };
  positive("h (hidden size, model.hidden)", h);
  positive("a (attention heads, model.heads)", a);
  positive("L (layers, model.layers)", L);
  positive("v (vocabulary, model.vocab)", v);
  positive("s (sequence length, model.seq)", s);
  positive("b (microbatch, model.micro_batch)", b);
  positive("d_ff (MLP width, model.ffn)", d_ff);
  positive("t (tensor-parallel size, model.tp)", t);
  positive("experts (model.experts)", experts);
  positive("top_k (model.top_k)", top_k);
  positive("norms_per_layer", norms_per_layer);
  non_negative("head_dim", d_head);
  non_negative("positions", positions);
  non_negative("d_ff_expert", d_ff_expert);
  non_negative("d_ff_shared", d_ff_shared);
  non_negative("dense_layers", dense_layers);
  if (a_kv < 0 || kv_heads() > a) {
    throw InvalidArgument(fmt::format(
        "{}: a_kv (model.kv_heads) = {} must be between 1 and a = {} (0 means a)", ctx, a_kv, a));
  }
  if (a % kv_heads() != 0) {
    throw InvalidArgument(
        fmt::format("{}: a_kv (model.kv_heads) = {} must divide a (model.heads) = {}: each KV head "
                    "serves a/a_kv "
                    "query heads (a % a_kv = {}); divisors of {}: {}",
                    ctx, a_kv, a, a % kv_heads(), a, divisor_list(a)));
  }
  if (d_head == 0) {
    if (a > h) {
      throw InvalidArgument(fmt::format(
          "{}: a (model.heads) = {} exceeds h (model.hidden) = {}: head dimension h/a < 1", ctx, a,
          h));
    }
    if (h % a != 0) {
      throw InvalidArgument(fmt::format(
          "{}: h (model.hidden) = {} is not divisible by a (model.heads) = {} (h/a = {:.2f}): "
          "heads "
          "need equal integer size; use a head count dividing h (nearest: {}) or give head_dim",
          ctx, h, a, static_cast<double>(h) / static_cast<double>(a), nearest_divisors(h, a)));
    }
  }
  if (a % t != 0) {
    throw InvalidArgument(
        fmt::format("{}: t (model.tp) = {} must divide a (model.heads) = {}: tensor parallelism "
                    "gives each rank "
                    "a/t whole heads; usable t: {}",
                    ctx, t, a, divisor_list(a, 16)));
  }
  if (kv_heads() % t != 0 && t % kv_heads() != 0) {
    throw InvalidArgument(
        fmt::format("{}: t (model.tp) = {} and a_kv (model.kv_heads) = {}: one must divide the "
                    "other, so KV heads "
                    "split evenly (a_kv/t) or replicate evenly (t/a_kv copies)",
                    ctx, t, kv_heads()));
  }
  if (top_k > experts) {
    throw InvalidArgument(fmt::format("{}: top_k (model.top_k) = {} must not exceed experts = {}",
                                      ctx, top_k, experts));
  }
  // One microbatch's activations, b·s·h elements, are bounded like every GEMM operand; checked
  // here so that the error names the model's fields rather than the first GEMM whose rows wrapped.
  std::int64_t activations = 0;
  if (__builtin_mul_overflow(b, s, &activations) ||
      __builtin_mul_overflow(activations, h, &activations) || activations > kMaxOperandElements) {
    throw InvalidArgument(fmt::format(
        "{}: b (model.micro_batch) = {}, s (model.seq) = {} and h (model.hidden) = {}: one "
        "microbatch's activations, b·s·h elements, must be at most {} (their bytes must fit in "
        "64 bits)",
        ctx, b, s, h, kMaxOperandElements));
  }
  // The tokens the experts receive, b·s·top_k rows in all, are bounded alike: their product
  // wrapped to 0 and the expert GEMMs divided by it (SIGFPE).
  std::int64_t routed = 0;
  if (is_moe() && (__builtin_mul_overflow(b * s, top_k, &routed) ||
                   __builtin_mul_overflow(routed, h, &routed) || routed > kMaxOperandElements)) {
    throw InvalidArgument(fmt::format(
        "{}: b (model.micro_batch) = {}, s (model.seq) = {}, top_k (model.top_k) = {} and h = {}: "
        "the routed tokens' activations, b·s·top_k·h elements, must be at most {}",
        ctx, b, s, top_k, h, kMaxOperandElements));
  }
  if (dense_layers > L) {
    throw InvalidArgument(
        fmt::format("{}: dense_layers = {} must not exceed L = {}", ctx, dense_layers, L));
  }
  non_negative("q_lora_rank", q_lora_rank);
  non_negative("kv_lora_rank", kv_lora_rank);
  non_negative("qk_nope_dim", qk_nope_dim);
  non_negative("qk_rope_dim", qk_rope_dim);
  non_negative("v_head_dim", v_head_dim);
  non_negative("sliding_window", sliding_window);
  non_negative("sliding_layers", sliding_layers);
  if (is_mla() && (qk_nope_dim + qk_rope_dim <= 0 || v_head_dim <= 0)) {
    throw InvalidArgument(fmt::format(
        "{}: kv_lora_rank = {} (latent attention) needs qk_nope_dim + qk_rope_dim > 0 and "
        "v_head_dim > 0 (got {}, {} and {})",
        ctx, kv_lora_rank, qk_nope_dim, qk_rope_dim, v_head_dim));
  }
  if (sliding_layers > L) {
    throw InvalidArgument(
        fmt::format("{}: sliding_layers = {} must not exceed L = {}", ctx, sliding_layers, L));
  }
  if (sliding_layers > 0 && sliding_window <= 0) {
    throw InvalidArgument(fmt::format(
        "{}: sliding_layers = {} needs sliding_window > 0 (the tokens each query attends to)", ctx,
        sliding_layers));
  }
}

std::int64_t ModelShape::qk_head_dim() const {
  return is_mla() ? qk_nope_dim + qk_rope_dim : head_dim();
}

std::int64_t ModelShape::v_dim() const {
  return is_mla() ? v_head_dim : head_dim();
}

bool operator==(const ModelShape& x, const ModelShape& y) {
  return json(x) == json(y);
}

void to_json(json& j, const ModelShape& m) {
  j = json{{"name", m.name},
           {"h", m.h},
           {"a", m.a},
           {"a_kv", m.kv_heads()},
           {"L", m.L},
           {"v", m.v},
           {"s", m.s},
           {"b", m.b},
           {"d_ff", m.d_ff},
           {"mlp", to_string(m.mlp)},
           {"tied_embeddings", m.tied_embeddings},
           {"experts", m.experts},
           {"top_k", m.top_k},
           {"t", m.t},
           {"dtype", to_string(m.dtype)},
           {"attention", to_string(m.attention)},
           {"norm", to_string(m.norm)},
           {"position", to_string(m.position)},
           {"linear_bias", m.linear_bias},
           {"head_dim", m.head_dim()},
           {"qkv_bias", m.qkv_bias},
           {"norms_per_layer", m.norms_per_layer},
           {"positions", m.positions},
           {"d_ff_expert", m.d_ff_expert},
           {"d_ff_shared", m.d_ff_shared},
           {"dense_layers", m.dense_layers}};
  // Written only when used, so that the JSON of the older architectures does not change.
  if (m.is_mla()) {
    j["q_lora_rank"] = m.q_lora_rank;
    j["kv_lora_rank"] = m.kv_lora_rank;
    j["qk_nope_dim"] = m.qk_nope_dim;
    j["qk_rope_dim"] = m.qk_rope_dim;
    j["v_head_dim"] = m.v_head_dim;
  }
  if (m.sliding_layers > 0) {
    j["sliding_window"] = m.sliding_window;
    j["sliding_layers"] = m.sliding_layers;
  }
  if (m.attention_sinks) j["attention_sinks"] = true;
  if (m.qk_norm) j["qk_norm"] = true;
}

void from_json(const json& j, ModelShape& m) {
  if (!j.is_object()) throw InvalidArgument("model: expected a JSON object, got " + j.dump());
  detail::refuse_unknown_keys(j,
                              {"name",
                               "h",
                               "a",
                               "a_kv",
                               "L",
                               "v",
                               "s",
                               "b",
                               "d_ff",
                               "mlp",
                               "tied_embeddings",
                               "experts",
                               "top_k",
                               "t",
                               "dtype",
                               "attention",
                               "norm",
                               "position",
                               "linear_bias",
                               "head_dim",
                               "qkv_bias",
                               "norms_per_layer",
                               "positions",
                               "d_ff_expert",
                               "d_ff_shared",
                               "dense_layers",
                               "q_lora_rank",
                               "kv_lora_rank",
                               "qk_nope_dim",
                               "qk_rope_dim",
                               "v_head_dim",
                               "sliding_window",
                               "sliding_layers",
                               "attention_sinks",
                               "qk_norm",
                               "source",
                               "notes"},
                              "model");
  const std::string ctx = "model";
  optional(j, "name", ctx, m.name);
  optional(j, "h", ctx, m.h);
  optional(j, "a", ctx, m.a);
  optional(j, "a_kv", ctx, m.a_kv);
  optional(j, "L", ctx, m.L);
  optional(j, "v", ctx, m.v);
  optional(j, "s", ctx, m.s);
  optional(j, "b", ctx, m.b);
  optional(j, "d_ff", ctx, m.d_ff);
  optional(j, "tied_embeddings", ctx, m.tied_embeddings);
  optional(j, "experts", ctx, m.experts);
  optional(j, "top_k", ctx, m.top_k);
  optional(j, "t", ctx, m.t);
  optional(j, "linear_bias", ctx, m.linear_bias);
  optional(j, "qkv_bias", ctx, m.qkv_bias);
  optional(j, "norms_per_layer", ctx, m.norms_per_layer);
  optional(j, "positions", ctx, m.positions);
  optional(j, "d_ff_expert", ctx, m.d_ff_expert);
  optional(j, "d_ff_shared", ctx, m.d_ff_shared);
  optional(j, "dense_layers", ctx, m.dense_layers);
  optional(j, "q_lora_rank", ctx, m.q_lora_rank);
  optional(j, "kv_lora_rank", ctx, m.kv_lora_rank);
  optional(j, "qk_nope_dim", ctx, m.qk_nope_dim);
  optional(j, "qk_rope_dim", ctx, m.qk_rope_dim);
  optional(j, "v_head_dim", ctx, m.v_head_dim);
  optional(j, "sliding_window", ctx, m.sliding_window);
  optional(j, "sliding_layers", ctx, m.sliding_layers);
  optional(j, "attention_sinks", ctx, m.attention_sinks);
  optional(j, "qk_norm", ctx, m.qk_norm);
  // head_dim is written for every model; only a value other than h/a is an override (a negative
  // one too, so that validate() refuses it instead of its being dropped).
  std::int64_t head_dim = 0;
  optional(j, "head_dim", ctx, head_dim);
  if (head_dim != 0 && !(m.a > 0 && m.h % m.a == 0 && m.h / m.a == head_dim)) m.d_head = head_dim;
  if (j.contains("mlp")) m.mlp = parse_mlp_type(required<std::string>(j, "mlp", ctx));
  if (j.contains("dtype")) m.dtype = parse_dtype(required<std::string>(j, "dtype", ctx));
  if (j.contains("attention")) {
    m.attention = parse_attention_impl(required<std::string>(j, "attention", ctx));
  }
  if (j.contains("norm")) m.norm = parse_norm_type(required<std::string>(j, "norm", ctx));
  if (j.contains("position")) {
    m.position = parse_position_embedding(required<std::string>(j, "position", ctx));
  }
  if (m.d_ff == 0 && m.h > 0) m.d_ff = default_mlp_width(m.h);
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(data_dir() / "models", ec)) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::int64_t default_mlp_width(std::int64_t h, std::int64_t ratio) {
  // Refused here, naming h: left to wrap, the width would reach validate() as a d_ff of 0 or less
  // and the error would blame d_ff, which the user never set.
  std::int64_t d_ff = 0;
  if (__builtin_mul_overflow(h, ratio, &d_ff)) {
    throw InvalidArgument(fmt::format(
        "model: h (model.hidden) = {} is too large: the default MLP width d_ff = {}h does not fit "
        "in 64 bits",
        h, ratio));
  }
  return d_ff;
}

bool is_default_mlp_width(std::int64_t d_ff, std::int64_t h, std::int64_t ratio) {
  // Without computing ratio·h, which may not fit 64 bits for a model file's h.
  return ratio > 0 && d_ff % ratio == 0 && d_ff / ratio == h;
}

bool ModelOverrides::changes_dimensions() const noexcept {
  return h || a || a_kv || L || v || d_ff || experts || top_k;
}

bool tp_splits_heads(std::int64_t a, std::int64_t a_kv, std::int64_t t) {
  return t > 0 && a_kv > 0 && a % t == 0 && (a_kv % t == 0 || t % a_kv == 0);
}

std::int64_t kv_heads_keeping_group(const ModelShape& m, std::int64_t a) {
  if (!groups_evenly(m)) return 0;             // no group size to keep (a model not yet validated)
  if (m.kv_heads() == 1 && m.a > 1) return 1;  // multi-query
  const std::int64_t group = m.a / m.kv_heads();
  return a % group == 0 ? a / group : 0;
}

void set_layers(ModelShape& m, std::int64_t L) {
  if (m.sliding_layers > 0 && m.L > 0 && L > 0) {
    const std::int64_t full = m.L - m.sliding_layers;
    // The same share, rounded (in double: full * L may not fit 64 bits in a sweep).
    auto full_after = static_cast<std::int64_t>(std::llround(
        static_cast<double>(full) * static_cast<double>(L) / static_cast<double>(m.L)));
    // A model with full-attention layers keeps at least one: rounding must not make it local only.
    if (full > 0) full_after = std::max<std::int64_t>(full_after, 1);
    m.sliding_layers = std::clamp<std::int64_t>(L - full_after, 0, L);
  }
  if (L > 0) m.dense_layers = std::min(m.dense_layers, L);
  m.L = L;
}

void apply_overrides(ModelShape& m, const ModelOverrides& o) {
  const auto set = [](auto& field, const auto& value) {
    if (value) field = *value;
  };
  const bool h_changed = o.h.has_value() && *o.h != m.h;
  const bool was_mha = m.a_kv == 0 || m.a_kv == m.a;
  const ModelShape before = m;
  const bool gelu_4h = is_default_mlp_width(m.d_ff, m.h);
  set(m.h, o.h);
  set(m.a, o.a);
  set(m.a_kv, o.a_kv);
  if (o.L) set_layers(m, *o.L);
  set(m.v, o.v);
  set(m.s, o.s);
  set(m.b, o.b);
  set(m.d_ff, o.d_ff);
  set(m.experts, o.experts);
  set(m.top_k, o.top_k);
  set(m.t, o.t);
  set(m.mlp, o.mlp);
  set(m.dtype, o.dtype);
  set(m.attention, o.attention);
  set(m.norm, o.norm);
  set(m.position, o.position);
  set(m.tied_embeddings, o.tied_embeddings);
  set(m.linear_bias, o.linear_bias);
  // A new h keeps a GeLU model's 4h MLP unless d_ff was given too.
  if (!o.d_ff && (m.d_ff == 0 || (h_changed && gelu_4h && m.mlp == MlpType::gelu))) {
    m.d_ff = default_mlp_width(m.h);
  }
  // A new head count keeps multi-head attention multi-head, multi-query attention multi-query, and
  // a GQA model's group size a/a_kv where it divides the new count: the rule of the advisor, the
  // sweep and the guidelines' head suggestions, so a suggested a given as --heads is that shape.
  // Where the group does not divide it, a_kv stays (validate() names it if it does not divide a).
  if (o.a && !o.a_kv) {
    if (was_mha) {
      m.a_kv = m.a;
    } else if (const std::int64_t kv = kv_heads_keeping_group(before, m.a); kv > 0) {
      m.a_kv = kv;
    } else if (m.a_kv > m.a) {
      m.a_kv = m.a;
    }
  }
}

ModelShape load_preset(const std::string& name) {
  const auto path = data_dir() / "models" / (name + ".json");
  std::ifstream in(path);
  if (!in) {
    std::string known;
    for (const auto& n : preset_names())
      known += (known.empty() ? "" : ", ") + n;
    throw InvalidArgument(fmt::format("model.name '{}' is not known (looked in {}); presets: {}",
                                      name, (data_dir() / "models").string(),
                                      known.empty() ? "none" : known));
  }
  try {
    ModelShape m = json::parse(in).get<ModelShape>();
    if (m.name.empty()) m.name = name;
    m.validate();
    return m;
  } catch (const json::exception& e) {
    throw InvalidArgument(fmt::format("preset file '{}': {}", path.string(), e.what()));
  }
}

namespace {

std::int64_t ceil_div(std::int64_t x, std::int64_t y) {
  return (x + y - 1) / y;
}

// Backward GEMMs of a forward Y[MxN] = X[MxK] W[KxN]: dX = dY W^T is M x K reducing over N, and
// dW = X^T dY is K x N reducing over M. For the attention BMMs both operands are activations, and
// the same two permutations give the gradients of the left and the right operand.
void add_with_backward(std::vector<Gemm>& out, const Gemm& fwd, bool training) {
  out.push_back(fwd);
  if (!training) return;
  Gemm dgrad = fwd;
  dgrad.pass = Pass::dgrad;
  dgrad.n = fwd.k;
  dgrad.k = fwd.n;
  out.push_back(dgrad);
  Gemm wgrad = fwd;
  wgrad.pass = Pass::wgrad;
  wgrad.m = fwd.k;
  wgrad.n = fwd.n;
  wgrad.k = fwd.m;
  out.push_back(wgrad);
}

Gemm make(const char* role, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
          DType dtype) {
  Gemm g;
  g.role = role;
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = batch;
  g.dtype = dtype;
  return g;
}

}  // namespace

std::vector<Gemm> layer_gemms(const ModelShape& model, bool training) {
  return layer_gemms(model, training, model.s);
}

namespace {

// The projections into Q, K and V. Standard attention: one fused QKV GEMM. Latent attention
// (DeepSeek-V2/V3, as Megatron-Core runs it for training, without absorbing the up-projections):
// down-projections to the latents, replicated on every TP rank, then per-head up-projections.
void add_qkv(std::vector<Gemm>& out, const ModelShape& x, std::int64_t tokens,
             std::int64_t heads_per_gpu, std::int64_t kv_per_gpu, bool training) {
  const DType dt = x.dtype;
  if (!x.is_mla()) {
    add_with_backward(
        out, make("qkv", tokens, (heads_per_gpu + 2 * kv_per_gpu) * x.head_dim(), x.h, 1, dt),
        training);
    return;
  }
  const std::int64_t q_width = heads_per_gpu * x.qk_head_dim();
  if (x.q_lora_rank > 0) {
    add_with_backward(out, make("q_down", tokens, x.q_lora_rank, x.h, 1, dt), training);
    add_with_backward(out, make("q_up", tokens, q_width, x.q_lora_rank, 1, dt), training);
  } else {
    add_with_backward(out, make("q_proj", tokens, q_width, x.h, 1, dt), training);
  }
  add_with_backward(out, make("kv_down", tokens, x.kv_lora_rank + x.qk_rope_dim, x.h, 1, dt),
                    training);
  add_with_backward(
      out,
      make("kv_up", tokens, heads_per_gpu * (x.qk_nope_dim + x.v_head_dim), x.kv_lora_rank, 1, dt),
      training);
}

}  // namespace

std::vector<Gemm> layer_gemms(const ModelShape& model, bool training, std::int64_t span) {
  model.validate();
  const ModelShape& x = model;
  // Sharded dimensions that do not divide evenly are rounded up: the largest shard sets the time.
  const std::int64_t tokens = x.b * x.s;
  const std::int64_t dqk = x.qk_head_dim();
  const std::int64_t dv = x.v_dim();
  const std::int64_t heads_per_gpu = ceil_div(x.a, x.t);
  const std::int64_t kv_per_gpu = ceil_div(x.kv_heads(), x.t);
  const std::int64_t keys = span > 0 ? std::min(span, x.s) : x.s;
  const DType dt = x.dtype;
  std::vector<Gemm> out;

  add_qkv(out, x, tokens, heads_per_gpu, kv_per_gpu, training);
  if (x.attention == AttentionImpl::unfused) {
    // Grouped-query attention is modelled as repeat-KV: the BMMs run once per query head. A
    // sliding window masks scores but the BMMs still compute all s x s of them.
    add_with_backward(out, make("attn_score", x.s, x.s, dqk, x.b * heads_per_gpu, dt), training);
    add_with_backward(out, make("attn_over_value", x.s, dv, x.s, x.b * heads_per_gpu, dt),
                      training);
  } else {
    // Flash attention fuses QK^T and PV in one kernel: s x keys outputs, each reducing over the
    // query/key and the value head dims. Same FLOPs as the two BMMs; a small head dim shows up as a
    // short K. Attention sinks add one logit per head to the softmax: no GEMM.
    add_with_backward(out, make("attn_flash", x.s, keys, dqk + dv, x.b * heads_per_gpu, dt),
                      training);
  }
  add_with_backward(out, make("attn_proj", tokens, x.h, heads_per_gpu * dv, 1, dt), training);

  const std::int64_t ff = ceil_div(x.d_ff, x.t);
  if (!x.is_moe()) {
    if (x.gated_mlp()) {
      add_with_backward(out, make("mlp_gate", tokens, ff, x.h, 1, dt), training);
    }
    add_with_backward(out, make("mlp_up", tokens, ff, x.h, 1, dt), training);
    add_with_backward(out, make("mlp_down", tokens, x.h, ff, 1, dt), training);
  } else {
    // Router is replicated; each expert sees tokens * top_k / experts tokens on average (perfect
    // balance), and the experts run as one grouped GEMM (batch = experts). With fewer routed
    // copies than experts (decoding, small batches) only as many experts run, one token each.
    add_with_backward(out, make("moe_router", tokens, x.experts, x.h, 1, dt), training);
    const std::int64_t copies = tokens * x.top_k;
    const std::int64_t active = std::min(x.experts, copies);
    const std::int64_t per_expert = ceil_div(copies, active);
    const std::int64_t eff = ceil_div(x.expert_width(), x.t);
    if (x.gated_mlp()) {
      add_with_backward(out, make("moe_gate", per_expert, eff, x.h, active, dt), training);
    }
    add_with_backward(out, make("moe_up", per_expert, eff, x.h, active, dt), training);
    add_with_backward(out, make("moe_down", per_expert, x.h, eff, active, dt), training);
    // Shared experts see every token: one dense MLP of their summed width.
    if (x.d_ff_shared > 0) {
      const std::int64_t sff = ceil_div(x.d_ff_shared, x.t);
      if (x.gated_mlp()) {
        add_with_backward(out, make("shared_gate", tokens, sff, x.h, 1, dt), training);
      }
      add_with_backward(out, make("shared_up", tokens, sff, x.h, 1, dt), training);
      add_with_backward(out, make("shared_down", tokens, x.h, sff, 1, dt), training);
    }
  }
  return out;
}

std::vector<Gemm> logit_gemms(const ModelShape& model, bool training) {
  model.validate();
  std::vector<Gemm> out;
  add_with_backward(
      out, make("logits", model.b * model.s, ceil_div(model.v, model.t), model.h, 1, model.dtype),
      training);
  return out;
}

std::vector<LayerGroup> layer_groups(const ModelShape& model) {
  model.validate();
  const std::int64_t dense = model.is_moe() ? model.dense_layers : 0;
  const std::int64_t sliding = model.sliding_window > 0 ? model.sliding_layers : 0;
  // Which layers slide is left open: counts split in proportion, dense layers first.
  const std::int64_t dense_sliding = model.L > 0 ? dense * sliding / model.L : 0;
  const std::int64_t moe_sliding = sliding - dense_sliding;
  const ModelShape dense_shape = dense_layer_of(model);
  const std::int64_t window = std::min(model.sliding_window, model.s);
  std::vector<LayerGroup> out;
  const auto add = [&out](const char* kind, std::int64_t count, const ModelShape& shape,
                          std::int64_t span) {
    if (count > 0) out.push_back({kind, count, shape, span});
  };
  add("layer", model.L - dense - moe_sliding, model, model.s);
  add("sliding", moe_sliding, model, window);
  add("dense", dense - dense_sliding, dense_shape, model.s);
  add("dense sliding", dense_sliding, dense_shape, window);
  return out;
}

}  // namespace mcr::codesign
