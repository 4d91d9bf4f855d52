// Hugging Face config.json -> ModelShape. Field names differ per architecture family; the mapping
// below covers Llama, Mistral, Mixtral, Qwen2, GPT-NeoX, GPT-2 and GPT-J.
#include <fmt/core.h>

#include <fstream>

#include "json_util.hpp"
#include "mcr/codesign/model.hpp"
#include "mcr/errors.hpp"

namespace mcr::codesign {

using nlohmann::json;

namespace {

std::int64_t first_int(const json& j, std::initializer_list<const char*> keys,
                       std::int64_t fallback, const std::string& model_type) {
  for (const char* key : keys) {
    if (j.contains(key) && j.at(key).is_number_integer()) return j.at(key).get<std::int64_t>();
  }
  if (fallback >= 0) return fallback;
  std::string names;
  for (const char* key : keys)
    names += (names.empty() ? "" : " or ") + std::string(key);
  throw InvalidArgument(
      fmt::format("config.json (model_type '{}'): missing integer field {}", model_type, names));
}

}  // namespace

ModelShape from_hf_config(const json& c) {
  if (!c.is_object()) throw InvalidArgument("config.json: expected a JSON object");
  const std::string type = c.value("model_type", std::string("llama"));
  ModelShape m;
  m.name = c.value("_name_or_path", type);
  const bool gpt2_like = type == "gpt2" || type == "gptj";
  m.h = first_int(c, {"hidden_size", "n_embd", "d_model"}, -1, type);
  m.a = first_int(c, {"num_attention_heads", "n_head"}, -1, type);
  m.a_kv = first_int(c, {"num_key_value_heads"}, m.a, type);
  m.L = first_int(c, {"num_hidden_layers", "n_layer"}, -1, type);
  m.v = first_int(c, {"vocab_size"}, -1, type);
  m.s = first_int(c, {"max_position_embeddings", "n_positions", "n_ctx"}, 2048, type);
  // GPT-2/GPT-J write n_inner = null for the default 4h.
  m.d_ff = first_int(c, {"intermediate_size", "n_inner", "ffn_dim"}, 4 * m.h, type);
  const std::string act =
      c.value("hidden_act", c.value("activation_function", std::string("gelu")));
  m.mlp = (act == "silu" || act == "swish" || act == "swiglu") ? MlpType::swiglu : MlpType::gelu;
  if (type == "mixtral" || c.contains("num_local_experts")) {
    m.experts = first_int(c, {"num_local_experts", "num_experts"}, 1, type);
    m.top_k = first_int(c, {"num_experts_per_tok"}, 2, type);
  }
  const bool llama_family =
      type == "llama" || type == "mistral" || type == "mixtral" || type == "qwen2";
  m.norm = llama_family ? NormType::rmsnorm : NormType::layernorm;
  m.position = type == "gpt2" ? PositionEmbedding::learned : PositionEmbedding::rotary;
  // Llama-family linears have no biases (Qwen2 has them on q/k/v only: a few thousand parameters).
  m.linear_bias = !llama_family;
  m.tied_embeddings = c.value("tie_word_embeddings", gpt2_like && type == "gpt2");
  const std::string torch_dtype = c.value("torch_dtype", std::string("bfloat16"));
  try {
    m.dtype = parse_dtype(torch_dtype);
  } catch (const InvalidArgument&) {
    m.dtype = DType::bf16;  // e.g. "auto": keep the training default
  }
  m.validate();
  return m;
}

ModelShape load_hf_config(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument(fmt::format("--config '{}' cannot be opened", path.string()));
  try {
    return from_hf_config(json::parse(in));
  } catch (const json::exception& e) {
    throw InvalidArgument(fmt::format("--config '{}': {}", path.string(), e.what()));
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("--config '{}': {}", path.string(), e.what()));
  }
}

}  // namespace mcr::codesign
