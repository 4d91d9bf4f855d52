// A transformer's shape and the GEMMs it runs per layer, per GPU (Megatron tensor parallelism).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcr/codesign/dtype.hpp"
#include "mcr/codesign/gemm.hpp"

namespace mcr::codesign {

/// gelu: two matrices (up, down) with any pointwise activation (GeLU, ReLU); swiglu and geglu:
/// gated, three matrices (gate, up, down), SiLU or GeLU on the gate.
enum class MlpType { gelu, swiglu, geglu };
enum class AttentionImpl { unfused, flash };
enum class NormType { layernorm, rmsnorm };
/// learned: a table of positions x h parameters; rotary and alibi have no parameters.
enum class PositionEmbedding { learned, rotary, alibi };

std::string to_string(MlpType v);
std::string to_string(AttentionImpl v);
std::string to_string(NormType v);
std::string to_string(PositionEmbedding v);
MlpType parse_mlp_type(const std::string& s);                      ///< gelu | swiglu | geglu
AttentionImpl parse_attention_impl(const std::string& s);          ///< unfused | bmm | flash
NormType parse_norm_type(const std::string& s);                    ///< layernorm | rmsnorm
PositionEmbedding parse_position_embedding(const std::string& s);  ///< learned | rotary | alibi

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
  // Fields added for architectures beyond GPT/Llama; each default keeps the older behaviour.
  std::int64_t d_head = 0;  ///< head dimension when it is not h/a (Gemma: 256); 0 means h/a
  bool qkv_bias = false;    ///< biases on Q, K and V only (Qwen2) when linear_bias is false
  std::int64_t norms_per_layer = 2;  ///< 1 for parallel blocks with one norm (GPT-J, Falcon-7B)
  std::int64_t positions = 0;     ///< learned position rows; 0 means s (OPT keeps 2 extra: s + 2)
  std::int64_t d_ff_expert = 0;   ///< MoE: width of one routed expert; 0 means d_ff
  std::int64_t d_ff_shared = 0;   ///< MoE: total width of the shared experts every token uses
  std::int64_t dense_layers = 0;  ///< MoE: leading layers with a dense d_ff MLP (DeepSeek-MoE)
  // Multi-head latent attention (DeepSeek-V2/V3): K and V come from a compressed latent of
  // kv_lora_rank values per token (plus a shared rotary key of qk_rope_dim), Q from a latent of
  // q_lora_rank (0: a plain projection). Active when kv_lora_rank > 0; head dims replace head_dim.
  std::int64_t q_lora_rank = 0;
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_dim = 0;  ///< per-head query/key dims without rotary embedding
  std::int64_t qk_rope_dim = 0;  ///< per-head query/key dims with rotary embedding
  std::int64_t v_head_dim = 0;   ///< per-head value dims
  // Local attention: sliding_layers of the L layers attend to the last sliding_window tokens only
  // (Gemma-3: 5 of every 6, gpt-oss: every other); the rest attend to the whole sequence.
  std::int64_t sliding_window = 0;
  std::int64_t sliding_layers = 0;
  bool attention_sinks = false;  ///< one learned logit per head and layer (gpt-oss): a parameters
  bool qk_norm = false;          ///< per-head norms of Q and K (Qwen3, Gemma-3): 2 x head_dim

  std::int64_t kv_heads() const { return a_kv > 0 ? a_kv : a; }
  bool is_mla() const { return kv_lora_rank > 0; }
  /// Per-head width of Q and K: qk_nope_dim + qk_rope_dim under MLA, else head_dim().
  std::int64_t qk_head_dim() const;
  /// Per-head width of V (and of the attention output): v_head_dim under MLA, else head_dim().
  std::int64_t v_dim() const;
  /// d_head when given, else h / a (integer part; validate() requires h % a == 0 then).
  std::int64_t head_dim() const { return d_head > 0 ? d_head : (a > 0 ? h / a : 0); }
  bool is_moe() const { return experts > 1; }
  bool gated_mlp() const { return mlp != MlpType::gelu; }
  std::int64_t expert_width() const { return d_ff_expert > 0 ? d_ff_expert : d_ff; }

  /// Throws mcr::InvalidArgument naming the field (with its term, e.g. "a_kv (model.kv_heads)"),
  /// the value and the rule, for shapes no model can have or Megatron cannot shard: non-positive
  /// sizes, a_kv not dividing a, h % a != 0 without an explicit head_dim, t not dividing a, t and
  /// a_kv neither dividing the other, top_k > experts. Shapes that are legal but slow are the
  /// guideline checker's business.
  void validate() const;
};
bool operator==(const ModelShape& x, const ModelShape& y);

void to_json(nlohmann::json& j, const ModelShape& m);
/// Missing fields keep the defaults of `m` (so a partial object overrides a preset).
void from_json(const nlohmann::json& j, ModelShape& m);

/// Loads `<data_dir>/models/<name>.json`; an unknown name lists the available presets.
/// Changes to a model's shape, each field left empty where the model keeps its value (the `mcr
/// shape`/`mcr plan` override flags, or a program exploring nearby shapes).
struct ModelOverrides {
  std::optional<std::int64_t> h{}, a{}, a_kv{}, L{}, v{}, s{}, b{}, d_ff{}, experts{}, top_k{}, t{};
  std::optional<MlpType> mlp{};
  std::optional<DType> dtype{};
  std::optional<AttentionImpl> attention{};
  std::optional<NormType> norm{};
  std::optional<PositionEmbedding> position{};
  std::optional<bool> tied_embeddings{}, linear_bias{};
  /// Whether any dimension (h, a, a_kv, L, v, d_ff, experts, top_k) is changed.
  bool changes_dimensions() const noexcept;
};

/// The MLP width of a model that gives none: ratio x h (4h, GPT's). Throws InvalidArgument naming
/// h where it does not fit in 64 bits.
std::int64_t default_mlp_width(std::int64_t h, std::int64_t ratio = 4);

/// Whether d_ff is the default width ratio x h (a GeLU model's 4h convention, kept when h moves).
bool is_default_mlp_width(std::int64_t d_ff, std::int64_t h, std::int64_t ratio = 4);

/// Applies `o` to `m` with the rules a user expects of a nearby shape: a new h keeps a GeLU
/// model's 4h MLP unless d_ff is given too (and a model without d_ff gets 4h); unless a_kv is
/// given, a new head count keeps multi-head attention multi-head, multi-query multi-query, and a
/// GQA model's group size a/a_kv where it divides the new count (else a_kv stays, at most a); a
/// new L goes through set_layers. Does not validate (ModelShape::validate).
void apply_overrides(ModelShape& m, const ModelOverrides& o);

/// Whether t tensor-parallel ranks can split a heads with a_kv key/value heads: t divides a, and
/// t and a_kv divide one way or the other (the KV heads split or replicate). The rule
/// ModelShape::validate() enforces for the model's own t.
bool tp_splits_heads(std::int64_t a, std::int64_t a_kv, std::int64_t t);

/// The key/value heads `m` has with `a` heads instead of m.a, keeping its GQA group size a/a_kv
/// (multi-head stays multi-head, multi-query stays multi-query); 0 when `a` is not a multiple of
/// the group size, or when m's heads do not form whole groups (a model not yet validated).
std::int64_t kv_heads_keeping_group(const ModelShape& m, std::int64_t a);

/// Sets the layer count L, keeping the layers' mix: a model whose every layer slides (Mistral)
/// keeps every layer sliding, one with a share of full-attention layers (Gemma-3's 1 in 6) keeps
/// that share, rounded, and at least one; leading dense layers of a mixture of experts stay, at
/// most L.
void set_layers(ModelShape& m, std::int64_t L);

ModelShape load_preset(const std::string& name);
std::vector<std::string> preset_names();

/// What a Hugging Face config.json import read, assumed and left out, for the user to check.
struct HfImport {
  ModelShape shape;
  std::string model_type;             ///< as written, or "llama" when absent
  bool known_type = true;             ///< false: read with the generic (Llama-like) mapping
  std::vector<std::string> used;      ///< config keys that set a field
  std::vector<std::string> ignored;   ///< keys present but not used (none changes the GEMMs)
  std::vector<std::string> defaults;  ///< "s = 4096: min(max_position_embeddings 32768, 4096)"
  std::vector<std::string> warnings;  ///< unknown model_type, keys the analyser cannot model
};

/// Longest sequence a config import analyses by default: min(max_position_embeddings, this). The
/// presets use the same training length (docs/codesign.md "Defaults").
inline constexpr std::int64_t kDefaultConfigSeq = 4096;

/// Reads a Hugging Face config.json: llama, mistral, mixtral, qwen2, qwen2_moe, gemma, gemma2,
/// falcon (and the older RefinedWeb schema), phi, gpt2, gptj, gpt_neox, opt, bloom, mpt, deepseek
/// (MoE with shared experts). Malformed values throw mcr::InvalidArgument naming key and value.
HfImport import_hf_config(const nlohmann::json& config);
/// import_hf_config(config).shape.
ModelShape from_hf_config(const nlohmann::json& config);
/// `field` names the file in errors (`model.config`: mcr shape's and mcr plan's --config; mcr gemm
/// reads configs as `request.models`, its --model).
HfImport import_hf_config_file(const std::filesystem::path& path,
                               std::string_view field = "model.config");
ModelShape load_hf_config(const std::filesystem::path& path,
                          std::string_view field = "model.config");

/// The GEMMs of one transformer layer on one GPU, forward first; with `training` also the dgrad and
/// wgrad GEMM of every forward GEMM that has a weight operand, and the backward BMMs of attention.
/// With flash attention the score/AV BMMs are still listed (same FLOPs) as one fused kernel's work.
std::vector<Gemm> layer_gemms(const ModelShape& model, bool training);
/// The logit (unembedding) GEMMs, run once per model pass: N = v/t.
std::vector<Gemm> logit_gemms(const ModelShape& model, bool training);

/// Layers of one kind: `count` layers whose GEMMs are layer_gemms(shape, ..., span). A model has up
/// to four kinds: dense or MoE MLP (leading dense layers of an MoE model), times full or sliding
/// attention; `shape` is the model itself for MoE layers and dense_layer_of(model) for dense ones.
struct LayerGroup {
  std::string kind;  ///< "layer", "dense", "sliding", "dense sliding"
  std::int64_t count = 0;
  ModelShape shape;
  std::int64_t span = 0;  ///< keys each query attends to: s, or the sliding window
};
/// The model's layers by kind (counts sum to L; groups with no layer are left out). Which layers
/// slide is not said; every GEMM total depends only on the counts.
std::vector<LayerGroup> layer_groups(const ModelShape& model);
/// layer_gemms of a layer whose queries attend to `span` keys (a sliding window shorter than s).
/// Flash attention then computes s x span scores; the unfused BMMs still compute s x s (masked).
std::vector<Gemm> layer_gemms(const ModelShape& model, bool training, std::int64_t span);

}  // namespace mcr::codesign
