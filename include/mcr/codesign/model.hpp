// A transformer's shape and the GEMMs it runs per layer, per GPU (Megatron tensor parallelism).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcr/codesign/dtype.hpp"
#include "mcr/codesign/gemm.hpp"

namespace mcr::codesign {

enum class MlpType { gelu, swiglu };
enum class AttentionImpl { unfused, flash };
enum class NormType { layernorm, rmsnorm };
enum class PositionEmbedding { learned, rotary };

std::string to_string(MlpType v);
std::string to_string(AttentionImpl v);
std::string to_string(NormType v);
std::string to_string(PositionEmbedding v);
MlpType parse_mlp_type(const std::string& s);                      ///< gelu | swiglu
AttentionImpl parse_attention_impl(const std::string& s);          ///< unfused | bmm | flash
NormType parse_norm_type(const std::string& s);                    ///< layernorm | rmsnorm
PositionEmbedding parse_position_embedding(const std::string& s);  ///< learned | rotary

/// Symbols follow the co-design paper: h hidden, a heads, a_kv key/value heads (GQA), L layers,
/// v vocabulary, s sequence length, b microbatch, d_ff MLP width, t tensor-parallel size.
struct ModelShape {
  std::string name;
  std::int64_t h = 0;
  std::int64_t a = 0;
  std::int64_t a_kv = 0;  ///< 0 means a (multi-head attention)
  std::int64_t L = 0;
  std::int64_t v = 0;
  std::int64_t s = 2048;
  std::int64_t b = 1;
  std::int64_t d_ff = 0;  ///< MLP width; when 0 after loading, 4h is used (GeLU convention)
  MlpType mlp = MlpType::gelu;
  bool tied_embeddings = false;
  std::int64_t experts = 1;  ///< 1 = dense MLP
  std::int64_t top_k = 1;
  std::int64_t t = 1;
  DType dtype = DType::bf16;
  AttentionImpl attention = AttentionImpl::unfused;
  // Details that change the parameter count but not the GEMMs.
  NormType norm = NormType::layernorm;
  PositionEmbedding position = PositionEmbedding::learned;
  bool linear_bias = true;

  std::int64_t kv_heads() const { return a_kv > 0 ? a_kv : a; }
  /// h / a (exact division is a guideline, not a requirement: integer part).
  std::int64_t head_dim() const { return a > 0 ? h / a : 0; }
  bool is_moe() const { return experts > 1; }

  /// Throws mcr::InvalidArgument naming the field, the value and the rule, for values no model can
  /// have (non-positive sizes, a_kv > a, top_k > experts, ...). Shapes that are legal but slow are
  /// the guideline checker's business, not this one's.
  void validate() const;
};
bool operator==(const ModelShape& x, const ModelShape& y);

void to_json(nlohmann::json& j, const ModelShape& m);
/// Missing fields keep the defaults of `m` (so a partial object overrides a preset).
void from_json(const nlohmann::json& j, ModelShape& m);

/// Loads `<data_dir>/models/<name>.json`; an unknown name lists the available presets.
ModelShape load_preset(const std::string& name);
std::vector<std::string> preset_names();

/// Reads a Hugging Face config.json (Llama, Mistral, Mixtral, GPT-NeoX, GPT-2, GPT-J, Qwen2
/// fields).
ModelShape from_hf_config(const nlohmann::json& config);
ModelShape load_hf_config(const std::filesystem::path& path);

/// The GEMMs of one transformer layer on one GPU, forward first; with `training` also the dgrad and
/// wgrad GEMM of every forward GEMM that has a weight operand, and the backward BMMs of attention.
/// With flash attention the score/AV BMMs are still listed (same FLOPs) as one fused kernel's work.
std::vector<Gemm> layer_gemms(const ModelShape& model, bool training);
/// The logit (unembedding) GEMMs, run once per model pass: N = v/t.
std::vector<Gemm> logit_gemms(const ModelShape& model, bool training);

}  // namespace mcr::codesign
