#include "mcr/codesign/model.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "json_util.hpp"
#include "mcr/codesign/paths.hpp"
#include "mcr/errors.hpp"

namespace mcr::codesign {

using detail::optional;
using detail::required;
using nlohmann::json;

std::string to_string(MlpType v) {
  return v == MlpType::gelu ? "gelu" : "swiglu";
}
std::string to_string(AttentionImpl v) {
  return v == AttentionImpl::unfused ? "unfused" : "flash";
}
std::string to_string(NormType v) {
  return v == NormType::layernorm ? "layernorm" : "rmsnorm";
}
std::string to_string(PositionEmbedding v) {
  return v == PositionEmbedding::learned ? "learned" : "rotary";
}

MlpType parse_mlp_type(const std::string& s) {
  if (s == "gelu") return MlpType::gelu;
  if (s == "swiglu") return MlpType::swiglu;
  throw InvalidArgument(fmt::format("mlp type '{}' is not known: use gelu or swiglu", s));
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
  throw InvalidArgument(
      fmt::format("position embedding '{}' is not known: use learned or rotary", s));
}

void ModelShape::validate() const {
  const std::string ctx = name.empty() ? std::string("model") : fmt::format("model '{}'", name);
  const auto positive = [&ctx](const char* field, std::int64_t value) {
    if (value <= 0) {
      throw InvalidArgument(
          fmt::format("{}: {} = {} must be a positive integer", ctx, field, value));
    }
  };
  positive("h (hidden size)", h);
  positive("a (attention heads)", a);
  positive("L (layers)", L);
  positive("v (vocabulary)", v);
  positive("s (sequence length)", s);
  positive("b (microbatch)", b);
  positive("d_ff (MLP width)", d_ff);
  positive("t (tensor-parallel size)", t);
  positive("experts", experts);
  positive("top_k", top_k);
  if (a_kv < 0 || kv_heads() > a) {
    throw InvalidArgument(
        fmt::format("{}: a_kv = {} must be between 1 and a = {} (0 means a)", ctx, a_kv, a));
  }
  if (a > h) {
    throw InvalidArgument(
        fmt::format("{}: a = {} heads exceed h = {}: head dimension h/a < 1", ctx, a, h));
  }
  if (top_k > experts) {
    throw InvalidArgument(
        fmt::format("{}: top_k = {} must not exceed experts = {}", ctx, top_k, experts));
  }
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
           {"linear_bias", m.linear_bias}};
}

void from_json(const json& j, ModelShape& m) {
  if (!j.is_object()) throw InvalidArgument("model: expected a JSON object, got " + j.dump());
  static const std::set<std::string> known{"name",
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
                                           "source",
                                           "notes"};
  for (const auto& [key, value] : j.items()) {
    if (known.count(key) == 0) {
      throw InvalidArgument(
          fmt::format("model: unknown field '{}' (known: h, a, a_kv, L, v, s, b, "
                      "d_ff, mlp, tied_embeddings, experts, top_k, t, dtype, "
                      "attention, norm, position, linear_bias, name)",
                      key));
    }
  }
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
  if (j.contains("mlp")) m.mlp = parse_mlp_type(required<std::string>(j, "mlp", ctx));
  if (j.contains("dtype")) m.dtype = parse_dtype(required<std::string>(j, "dtype", ctx));
  if (j.contains("attention")) {
    m.attention = parse_attention_impl(required<std::string>(j, "attention", ctx));
  }
  if (j.contains("norm")) m.norm = parse_norm_type(required<std::string>(j, "norm", ctx));
  if (j.contains("position")) {
    m.position = parse_position_embedding(required<std::string>(j, "position", ctx));
  }
  if (m.d_ff == 0 && m.h > 0) m.d_ff = 4 * m.h;
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

ModelShape load_preset(const std::string& name) {
  const auto path = data_dir() / "models" / (name + ".json");
  std::ifstream in(path);
  if (!in) {
    std::string known;
    for (const auto& n : preset_names())
      known += (known.empty() ? "" : ", ") + n;
    throw InvalidArgument(fmt::format("--preset '{}' is not known (looked in {}); presets: {}",
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
  model.validate();
  const ModelShape& x = model;
  // Sharded dimensions that do not divide evenly are rounded up: the largest shard sets the time.
  const std::int64_t tokens = x.b * x.s;
  const std::int64_t d = ceil_div(x.h, x.a);
  const std::int64_t heads_per_gpu = ceil_div(x.a, x.t);
  const std::int64_t kv_per_gpu = ceil_div(x.kv_heads(), x.t);
  const DType dt = x.dtype;
  std::vector<Gemm> out;

  add_with_backward(out, make("qkv", tokens, (heads_per_gpu + 2 * kv_per_gpu) * d, x.h, 1, dt),
                    training);
  if (x.attention == AttentionImpl::unfused) {
    // Grouped-query attention is modelled as repeat-KV: the BMMs run once per query head.
    add_with_backward(out, make("attn_score", x.s, x.s, d, x.b * heads_per_gpu, dt), training);
    add_with_backward(out, make("attn_over_value", x.s, d, x.s, x.b * heads_per_gpu, dt), training);
  } else {
    // Flash attention fuses QK^T and PV in one kernel: s x s outputs, each reducing over 2 head
    // dims. Same FLOPs as the two BMMs; a small head dim shows up as a short K.
    add_with_backward(out, make("attn_flash", x.s, x.s, 2 * d, x.b * heads_per_gpu, dt), training);
  }
  add_with_backward(out, make("attn_proj", tokens, x.h, heads_per_gpu * d, 1, dt), training);

  const std::int64_t ff = ceil_div(x.d_ff, x.t);
  if (!x.is_moe()) {
    if (x.mlp == MlpType::swiglu) {
      add_with_backward(out, make("mlp_gate", tokens, ff, x.h, 1, dt), training);
    }
    add_with_backward(out, make("mlp_up", tokens, ff, x.h, 1, dt), training);
    add_with_backward(out, make("mlp_down", tokens, x.h, ff, 1, dt), training);
  } else {
    // Router is replicated; each expert sees tokens * top_k / experts tokens on average (perfect
    // balance), and the experts run as one grouped GEMM (batch = experts).
    add_with_backward(out, make("moe_router", tokens, x.experts, x.h, 1, dt), training);
    const std::int64_t per_expert = ceil_div(tokens * x.top_k, x.experts);
    if (x.mlp == MlpType::swiglu) {
      add_with_backward(out, make("moe_gate", per_expert, ff, x.h, x.experts, dt), training);
    }
    add_with_backward(out, make("moe_up", per_expert, ff, x.h, x.experts, dt), training);
    add_with_backward(out, make("moe_down", per_expert, x.h, ff, x.experts, dt), training);
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

}  // namespace mcr::codesign
