// Hugging Face config.json -> ModelShape. Each architecture family names its fields differently and
// leaves different things implicit (tying, biases, learned positions, gating, norms per layer), so
// the mapping is per model_type. Every key is accounted for: it sets a field, is known not to
// change the GEMMs or the parameter count (dropout, token ids, rope settings), or is reported.
#include <fmt/core.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <string_view>

#include "mcr/codesign/model.hpp"
#include "mcr/errors.hpp"

namespace mcr::codesign {

using nlohmann::json;

namespace {

// Families whose config the importer knows. Anything else is read with the Llama mapping and a
// warning.
constexpr std::string_view kKnownTypes[] = {
    "llama",       "mistral",     "mixtral",    "qwen2",           "qwen2_moe",
    "qwen3",       "qwen3_moe",   "gemma",      "gemma2",          "gemma3",
    "gemma3_text", "falcon",      "RefinedWeb", "RefinedWebModel", "phi",
    "phi3",        "gpt2",        "gptj",       "gpt_neox",        "opt",
    "bloom",       "mpt",         "deepseek",   "deepseek_v2",     "deepseek_v3",
    "llama4",      "llama4_text", "gpt_oss"};

// Substrings of keys that never change a GEMM shape or a parameter count: numerics, token ids,
// dropout, rotary settings, runtime switches and bookkeeping.
constexpr std::string_view kIrrelevantParts[] = {"token_id",
                                                 "eps",
                                                 "dropout",
                                                 "pdrop",
                                                 "initializer",
                                                 "init_",
                                                 "rope",
                                                 "rotary",
                                                 "use_cache",
                                                 "architectures",
                                                 "transformers_version",
                                                 "_name_or_path",
                                                 "auto_map",
                                                 "output_",
                                                 "return_dict",
                                                 "scale",
                                                 "softcap",
                                                 "summary_",
                                                 "sliding_window",
                                                 "window_layers",
                                                 "router_",
                                                 "norm_topk",
                                                 "aux_loss",
                                                 "attn_implementation",
                                                 "pretraining_tp",
                                                 "task_specific",
                                                 "tokenizer",
                                                 "_layernorm",
                                                 "layer_norm_before",
                                                 "parallel_residual",
                                                 "residual_connection",
                                                 "softmax",
                                                 "slow_but_exact",
                                                 "is_decoder",
                                                 "layerdrop",
                                                 "prefix",
                                                 "n_ctx",
                                                 "skip_bias",
                                                 "alibi",
                                                 "fusion",
                                                 "scoring_func",
                                                 "seq_aux",
                                                 "topk_method",
                                                 "routed_scaling",
                                                 "cache_implementation",
                                                 "verbose",
                                                 "embedding_fraction",
                                                 "norm_type",
                                                 "use_bfloat16",
                                                 "gradient_checkpointing",
                                                 "pre_attn_scalar",
                                                 "n_group",
                                                 "topk_group",
                                                 "ep_size",
                                                 "swiglu_limit",
                                                 "initial_context_length",
                                                 "for_llm_compressor",
                                                 "original_max_position"};

bool irrelevant_key(const std::string& key) {
  return std::any_of(std::begin(kIrrelevantParts), std::end(kIrrelevantParts),
                     [&key](std::string_view part) { return key.find(part) != std::string::npos; });
}

class Reader {
 public:
  Reader(const json& c, HfImport& out) : c_(c), out_(out) {}

  // The first present key among `keys`; a present key must hold a positive integer (null counts
  // as absent: GPT-2 writes n_inner = null for 4h).
  std::optional<std::int64_t> integer(std::initializer_list<const char*> keys) {
    return read(keys, 1);
  }

  // As integer(), for a count that may be 0 (public configs write sliding_window 0 with the
  // window off, first_k_dense_replace 0, n_shared_experts 0, num_nextn_predict_layers 0).
  std::optional<std::int64_t> count(std::initializer_list<const char*> keys) {
    return read(keys, 0);
  }

  std::int64_t required(std::initializer_list<const char*> keys) {
    if (auto v = integer(keys)) return *v;
    std::string names;
    for (const char* key : keys)
      names += (names.empty() ? "" : " or ") + std::string(key);
    throw InvalidArgument(fmt::format("{}: missing integer field {}", context(), names));
  }

  std::optional<bool> boolean(const char* key) {
    if (!c_.contains(key) || c_.at(key).is_null()) return std::nullopt;
    if (!c_.at(key).is_boolean()) {
      throw InvalidArgument(
          fmt::format("{}: {} = {} must be true or false", context(), key, c_.at(key).dump()));
    }
    use(key);
    return c_.at(key).get<bool>();
  }

  std::optional<std::string> text(std::initializer_list<const char*> keys) {
    for (const char* key : keys) {
      if (!c_.contains(key) || c_.at(key).is_null()) continue;
      if (!c_.at(key).is_string()) {
        throw InvalidArgument(
            fmt::format("{}: {} = {} must be a string", context(), key, c_.at(key).dump()));
      }
      use(key);
      return c_.at(key).get<std::string>();
    }
    return std::nullopt;
  }

  const json* object(const char* key) {
    if (!c_.contains(key) || !c_.at(key).is_object()) return nullptr;
    use(key);
    return &c_.at(key);
  }

  void use(const std::string& key) {
    if (used_.insert(key).second) out_.used.push_back(key);
  }
  bool has(const char* key) const { return c_.contains(key) && !c_.at(key).is_null(); }
  bool was_used(const std::string& key) const { return used_.count(key) != 0; }
  std::string context() const { return fmt::format("config.json (model_type '{}')", type_); }
  void set_type(std::string type) { type_ = std::move(type); }

 private:
  std::optional<std::int64_t> read(std::initializer_list<const char*> keys, std::int64_t least) {
    for (const char* key : keys) {
      if (!c_.contains(key)) continue;
      const json& v = c_.at(key);
      if (v.is_null()) {
        use(key);  // read, and null means "the default"
        continue;
      }
      if (!v.is_number_integer()) {
        throw InvalidArgument(
            fmt::format("{}: {} = {} must be an integer", context(), key, v.dump()));
      }
      const auto value = v.get<std::int64_t>();
      if (value < least) {
        throw InvalidArgument(fmt::format("{}: {} = {} must be a {} integer", context(), key, value,
                                          least > 0 ? "positive" : "non-negative"));
      }
      use(key);
      return value;
    }
    return std::nullopt;
  }

  const json& c_;
  HfImport& out_;
  std::set<std::string> used_;
  std::string type_;
};

bool is(const std::string& type, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&type](const char* n) { return type == n; });
}

// Tying when the config does not say: transformers' per-class default (PretrainedConfig's is true;
// Llama, Mistral, Mixtral, Qwen2, Qwen2-MoE, Phi, GPT-J, GPT-NeoX and DeepSeek set false).
bool default_tying(const std::string& type) {
  return is(type, {"gemma", "gemma2", "gemma3", "gemma3_text", "falcon", "RefinedWeb",
                   "RefinedWebModel", "gpt2", "opt", "bloom", "mpt"});
}

// Layers with local attention and their window, from the forms configs use: a per-layer list
// (gpt-oss `layer_types`), Gemma-3's pattern (every pattern-th layer global), one window on every
// layer (Mistral, Mixtral, Phi-3), or every other layer (Gemma 2). Qwen2/3 switch it off with
// use_sliding_window.
void read_sliding_window(const json& c, Reader& in, const std::string& type, ModelShape& m,
                         HfImport& r) {
  // A null is the default, as for every key the reader takes; another type is an error naming it
  // (nlohmann's type_error named neither).
  const bool allowed = in.boolean("use_sliding_window").value_or(true);
  // Read where the window is off too: newer transformers write every layer's type beside
  // use_sliding_window false, and it was reported as a key not read. Only where every layer is of
  // a kind the shape has: another (Qwen3-Next's linear_attention) stays a key not read, said.
  if (c.contains("layer_types") && c.at("layer_types").is_array() &&
      std::all_of(c.at("layer_types").begin(), c.at("layer_types").end(), [](const json& t) {
        return t.is_string() && (t.get<std::string>() == "full_attention" ||
                                 t.get<std::string>() == "sliding_attention");
      })) {
    in.use("layer_types");
  }
  const auto window = in.count({"sliding_window"});  // 0: no window
  if (!window || *window == 0 || !allowed) return;
  if (c.contains("layer_types") && c.at("layer_types").is_array()) {
    in.use("layer_types");
    std::int64_t sliding = 0;
    for (const auto& t : c.at("layer_types")) {
      if (t.is_string() && t.get<std::string>() == "sliding_attention") ++sliding;
    }
    m.sliding_window = *window;
    m.sliding_layers = std::min(sliding, m.L);
  } else if (const auto pattern = in.integer({"sliding_window_pattern"})) {
    m.sliding_window = *window;
    m.sliding_layers = m.L - m.L / *pattern;  // layers i with (i + 1) % pattern != 0 slide
  } else if (is(type, {"mistral", "mixtral", "phi3"})) {
    m.sliding_window = *window;
    m.sliding_layers = m.L;
  } else if (type == "gemma2") {
    // Gemma 2 alternates in its model code, not its config: layers 0, 2, 4, ... slide.
    m.sliding_window = *window;
    m.sliding_layers = m.L - m.L / 2;
  } else {
    return;
  }
  r.defaults.push_back(
      fmt::format("sliding window {} on {} of {} layers", m.sliding_window, m.sliding_layers, m.L));
}

// Multi-head latent attention (DeepSeek-V2/V3). q_lora_rank null means a plain Q projection.
void read_latent_attention(Reader& in, ModelShape& m) {
  const auto kv_lora = in.integer({"kv_lora_rank"});
  if (!kv_lora) return;
  m.kv_lora_rank = *kv_lora;
  m.q_lora_rank = in.count({"q_lora_rank"}).value_or(0);
  m.qk_nope_dim = in.required({"qk_nope_head_dim"});
  m.qk_rope_dim = in.required({"qk_rope_head_dim"});
  m.v_head_dim = in.required({"v_head_dim"});
}

// transformers' Gemma3TextConfig defaults. Gemma-3's multimodal configs (4B, 12B, 27B) write in
// text_config only the fields that differ from them (4B: hidden_size, intermediate_size,
// num_hidden_layers, sliding_window), so the importer applies them as transformers does.
constexpr std::pair<const char*, std::int64_t> kGemma3TextDefaults[] = {
    {"hidden_size", 2304},      {"intermediate_size", 9216},
    {"num_hidden_layers", 26},  {"vocab_size", 262208},
    {"num_attention_heads", 8}, {"num_key_value_heads", 4},
    {"head_dim", 256},          {"max_position_embeddings", 131072},
    {"sliding_window", 4096},   {"sliding_window_pattern", 6},
};

// The config with the class defaults of its model_type filled in where it leaves them out, each
// said in r.defaults. A config whose layers are typed per layer (layer_types) keeps its own
// sliding pattern.
json with_class_defaults(const json& c, HfImport& r) {
  // (A model_type that is not a string is refused by the reader, naming it.)
  const auto type = c.find("model_type");
  if (type == c.end() || !type->is_string() || *type != "gemma3_text") return c;
  json filled = c;
  for (const auto& [key, value] : kGemma3TextDefaults) {
    if (c.contains(key)) continue;
    if (std::string_view(key) == "sliding_window_pattern" && c.contains("layer_types")) continue;
    filled[key] = value;
    r.defaults.push_back(
        fmt::format("{} = {}: absent, transformers' Gemma3TextConfig default", key, value));
  }
  return filled;
}

HfImport import_flat_config(const json& c);

}  // namespace

HfImport import_hf_config(const json& c) {
  if (!c.is_object()) throw InvalidArgument("config.json: expected a JSON object");
  // Multimodal configs (Llama-4, Gemma-3 4B+, ...) nest the language model in text_config; the
  // vision encoder and its projector are left out and said to be.
  if (c.contains("text_config") && c.at("text_config").is_object() && !c.contains("hidden_size")) {
    // The outer config's dtype and tying apply to the language model where text_config has none
    // (Gemma-3 4B gives torch_dtype only outside).
    json text = c.at("text_config");
    std::vector<std::string> inherited;
    const auto inherit = [&](std::initializer_list<const char*> keys) {
      for (const char* key : keys)
        if (text.contains(key)) return;  // the language model's own
      for (const char* key : keys) {
        if (!c.contains(key)) continue;
        text[key] = c.at(key);
        inherited.emplace_back(key);
        return;
      }
    };
    inherit({"torch_dtype", "dtype"});
    inherit({"tie_word_embeddings"});
    // Gemma3Config reads any text_config as a Gemma3TextConfig.
    const bool gemma3_type =
        c.contains("model_type") && c.at("model_type") == "gemma3" && !text.contains("model_type");
    if (gemma3_type) text["model_type"] = "gemma3_text";
    HfImport inner = import_hf_config(text);
    if (gemma3_type) {
      std::erase(inner.used, "model_type");
      inner.defaults.insert(inner.defaults.begin(),
                            "model_type = gemma3_text: absent in text_config, Gemma3Config's");
    }
    const std::string outer = c.value("model_type", std::string("unknown"));
    inner.model_type = outer + "/" + inner.model_type;
    inner.defaults.insert(
        inner.defaults.begin(),
        fmt::format("text_config of the '{}' config: the language model only", outer));
    for (auto& key : inner.used) {
      const bool outer_key = std::find(inherited.begin(), inherited.end(), key) != inherited.end();
      if (!outer_key) key = "text_config." + key;
    }
    for (const auto& [key, value] : c.items()) {
      if (key == "text_config") continue;
      if (std::find(inherited.begin(), inherited.end(), key) != inherited.end()) continue;
      inner.ignored.push_back(key);
    }
    if (c.contains("vision_config")) {
      inner.warnings.push_back(
          "vision_config: the vision encoder and projector are not counted (text model only)");
    }
    return inner;
  }
  return import_flat_config(c);
}

namespace {

HfImport import_flat_config(const json& config) {
  HfImport r;
  const json c = with_class_defaults(config, r);
  Reader in(c, r);
  const auto type_text = in.text({"model_type"});
  r.model_type = type_text.value_or("llama");
  if (!type_text) r.defaults.push_back("model_type: absent, read as llama");
  in.set_type(r.model_type);
  const std::string& type = r.model_type;
  r.known_type =
      std::find(std::begin(kKnownTypes), std::end(kKnownTypes), type) != std::end(kKnownTypes);
  if (!r.known_type) {
    r.warnings.push_back(fmt::format(
        "model_type '{}' is not known: read with the Llama mapping (hidden_size, "
        "num_attention_heads, intermediate_size, SiLU -> SwiGLU); check the parameter count",
        type));
  }
  ModelShape m;
  m.name = in.text({"_name_or_path"}).value_or(type);
  if (m.name.empty()) m.name = type;

  const bool falcon = is(type, {"falcon", "RefinedWeb", "RefinedWebModel"});
  const bool gemma = is(type, {"gemma", "gemma2", "gemma3", "gemma3_text"});
  const bool llama_like =
      !r.known_type ||
      is(type, {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3",
                "deepseek", "deepseek_v2", "deepseek_v3", "llama4_text", "gpt_oss"}) ||
      gemma;

  m.h = in.required({"hidden_size", "n_embd", "n_embed", "d_model"});
  m.a = in.required({"num_attention_heads", "n_head", "n_heads"});
  m.L = in.required({"num_hidden_layers", "n_layer", "n_layers", "num_layers"});
  m.v = in.required({"vocab_size", "padded_vocab_size"});

  // Attention heads. Falcon: the new decoder architecture (40B, 180B) has num_kv_heads groups,
  // the old one multi-query (one KV head) or full multi-head.
  if (falcon) {
    const bool new_arch = in.boolean("new_decoder_architecture").value_or(type == "RefinedWeb");
    const bool mqa = in.boolean("multi_query").value_or(true);
    const bool parallel_attn = in.boolean("parallel_attn").value_or(true);
    if (new_arch) {
      m.a_kv = in.integer({"num_kv_heads", "n_head_kv"}).value_or(m.a);
      m.norms_per_layer = in.integer({"num_ln_in_parallel_attn"}).value_or(2);
    } else {
      m.a_kv = mqa ? 1 : m.a;
      // Parallel attention and MLP share one LayerNorm (Falcon-7B); otherwise two.
      m.norms_per_layer = parallel_attn ? 1 : 2;
      in.integer({"num_kv_heads", "n_head_kv"});  // read for completeness; multi_query decides
    }
  } else {
    m.a_kv = in.integer({"num_key_value_heads", "num_kv_heads", "n_head_kv"}).value_or(m.a);
  }
  if (const json* attn = in.object("attn_config")) {  // MPT
    if (attn->contains("kv_n_heads") && attn->at("kv_n_heads").is_number_integer()) {
      m.a_kv = attn->at("kv_n_heads").get<std::int64_t>();
    }
    if (attn->contains("alibi") && !attn->at("alibi").is_null()) {
      if (!attn->at("alibi").is_boolean()) {
        throw InvalidArgument(
            fmt::format("attn_config.alibi = {} must be true or false", attn->at("alibi").dump()));
      }
      if (attn->at("alibi").get<bool>()) m.position = PositionEmbedding::alibi;
    }
  }
  if (const auto d = in.integer({"head_dim"})) {
    if (*d * m.a != m.h) m.d_head = *d;
  }
  read_latent_attention(in, m);

  // Sequence length: the config's maximum, capped at the training length the presets use.
  const auto max_pos =
      in.integer({"max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "seq_length"});
  m.s = std::min(max_pos.value_or(2048), kDefaultConfigSeq);
  r.defaults.push_back(
      max_pos ? fmt::format("s = {}: min(max positions {}, {}); set --seq to change", m.s, *max_pos,
                            kDefaultConfigSeq)
              : fmt::format("s = {}: the config gives no maximum length; set --seq", m.s));

  // MLP width and type.
  const auto expansion = in.integer({"expansion_ratio"});  // MPT
  const auto ff = in.integer({"intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size"});
  m.d_ff = ff ? *ff : default_mlp_width(m.h, expansion.value_or(4));
  if (!ff) r.defaults.push_back(fmt::format("d_ff = {} = {}h", m.d_ff, expansion.value_or(4)));
  const std::string act =
      in.text({"hidden_act", "hidden_activation", "activation_function"}).value_or("gelu");
  for (const char* key : {"hidden_act", "hidden_activation", "activation_function"}) {
    if (in.has(key)) in.use(key);  // Gemma 2 writes two of them
  }
  if (gemma) {
    m.mlp = MlpType::geglu;  // Gemma's MLP is gated whatever the activation name
  } else if (llama_like) {
    m.mlp = (act == "gelu" || act == "gelu_new" || act == "gelu_pytorch_tanh") ? MlpType::geglu
                                                                               : MlpType::swiglu;
  } else {
    m.mlp = MlpType::gelu;  // two matrices with any pointwise activation (GeLU, ReLU)
  }

  // Mixture of experts.
  if (const auto experts =
          in.integer({"num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"})) {
    m.experts = *experts;
    m.top_k = in.integer({"num_experts_per_tok", "experts_per_token", "moe_top_k"}).value_or(2);
    if (c.contains("experts_per_token")) in.use("experts_per_token");  // gpt-oss writes both
    if (type == "llama4_text") {
      // Llama 4: intermediate_size is the width of each routed expert and of the one shared
      // expert every MoE layer has; intermediate_size_mlp that of the dense layers.
      m.d_ff_expert = m.d_ff;
      m.d_ff_shared = m.d_ff;
      m.d_ff = in.integer({"intermediate_size_mlp"}).value_or(m.d_ff);
      const auto step = in.integer({"interleave_moe_layer_step"}).value_or(1);
      if (step > 1) {
        m.dense_layers = m.L - m.L / step;
        r.warnings.push_back(fmt::format(
            "interleave_moe_layer_step {}: the {} dense layers are counted as leading layers", step,
            m.dense_layers));
      }
    }
    if (const auto moe_ff = in.integer({"moe_intermediate_size"})) m.d_ff_expert = *moe_ff;
    // A shared width of 0 says "none" only if no count of shared experts follows.
    if (const auto shared = in.count({"shared_expert_intermediate_size"}); shared && *shared > 0) {
      m.d_ff_shared = *shared;  // Qwen2-MoE: one shared expert of this width
    } else if (const auto n_shared = in.count({"n_shared_experts"})) {
      m.d_ff_shared = *n_shared * m.expert_width();  // DeepSeek: n experts of the routed width
    }
    if (const auto dense = in.count({"first_k_dense_replace"})) m.dense_layers = *dense;
    const auto step = in.integer({"decoder_sparse_step", "moe_layer_freq"});
    if (step && *step != 1) {
      r.warnings.push_back(
          fmt::format("MoE layers every {} layers: the analyser models every layer as MoE", *step));
    }
    if (c.contains("mlp_only_layers") && c.at("mlp_only_layers").is_array()) {
      in.use("mlp_only_layers");
      if (!c.at("mlp_only_layers").empty()) {
        r.warnings.push_back("mlp_only_layers is not empty: those dense layers are counted as MoE");
      }
    }
  }

  // Norms, positions, biases, tying.
  m.norm = llama_like ? NormType::rmsnorm : NormType::layernorm;
  if (is(type, {"gemma2", "gemma3", "gemma3_text"})) {
    m.norms_per_layer = 4;  // pre and post norms around attention and MLP
  }
  // Per-head RMS norms of Q and K with weights (Qwen3, Gemma-3); Llama 4's use_qk_norm is a
  // weightless L2 norm.
  m.qk_norm = is(type, {"qwen3", "qwen3_moe", "gemma3", "gemma3_text"});
  if (c.contains("use_qk_norm")) in.use("use_qk_norm");
  if (type == "gpt_oss") m.attention_sinks = true;  // one learned logit per head and layer
  read_sliding_window(c, in, type, m, r);
  if (type == "llama4_text") {
    // Chunked local attention on three of every four layers (the fourth is global, without
    // rotary embedding): for the GEMMs, a window of one chunk.
    if (const auto chunk = in.integer({"attention_chunk_size"})) {
      m.sliding_window = *chunk;
      m.sliding_layers = m.L - m.L / 4;
      r.defaults.push_back(fmt::format("chunked attention: {} of {} layers attend within {} tokens",
                                       m.sliding_layers, m.L, *chunk));
    }
  }
  if (is(type, {"deepseek_v2", "deepseek_v3"})) {
    if (const auto mtp = in.count({"num_nextn_predict_layers"}); mtp && *mtp > 0) {
      r.defaults.push_back(fmt::format(
          "num_nextn_predict_layers = {}: the multi-token-prediction module is not counted (it is "
          "not part of the published main-model total)",
          *mtp));
    }
  }
  if (is(type, {"gptj", "phi"})) m.norms_per_layer = 1;  // one norm feeds attention and MLP
  if (type == "gpt2") {
    m.position = PositionEmbedding::learned;
    m.positions = max_pos.value_or(1024);
  } else if (type == "opt") {
    m.position = PositionEmbedding::learned;
    m.positions = max_pos.value_or(2048) + 2;  // OPT's learned table keeps an offset of 2 rows
  } else if (type == "bloom") {
    m.position = PositionEmbedding::alibi;
  } else if (falcon) {
    m.position =
        in.boolean("alibi").value_or(false) ? PositionEmbedding::alibi : PositionEmbedding::rotary;
  } else if (type != "mpt") {
    m.position = PositionEmbedding::rotary;
  }
  if (type == "mpt") {
    // ALiBi replaces the learned table even when learned_pos_emb is left true.
    const bool learned = in.boolean("learned_pos_emb").value_or(true);
    if (m.position != PositionEmbedding::alibi) {
      m.position = learned ? PositionEmbedding::learned : PositionEmbedding::rotary;
    }
  }

  if (falcon) {
    m.linear_bias = in.boolean("bias").value_or(false);
  } else if (type == "mpt") {
    m.linear_bias = !in.boolean("no_bias").value_or(false);
  } else if (type == "opt") {
    m.linear_bias = in.boolean("enable_bias").value_or(true);
  } else if (type == "gpt_oss") {
    // Biases on Q, K, V and O, on every expert's matrices and on the router.
    m.linear_bias = in.boolean("attention_bias").value_or(true);
  } else if (llama_like) {
    // Both keys are read (and so accounted for) whatever the first says.
    const bool attention_bias = in.boolean("attention_bias").value_or(false);
    const bool mlp_bias = in.boolean("mlp_bias").value_or(false);
    m.linear_bias = attention_bias && mlp_bias;
    m.qkv_bias = is(type, {"qwen2", "qwen2_moe"}) || attention_bias;
    // The shape has biases on every linear layer or on Q, K and V alone: one of the two keys
    // alone has biases the count leaves out, said rather than dropped.
    if (attention_bias && !mlp_bias) {
      r.warnings.push_back(
          "attention_bias without mlp_bias: the output projection's bias (h per layer) is not "
          "counted, only Q's, K's and V's");
    } else if (mlp_bias && !attention_bias) {
      r.warnings.push_back(
          "mlp_bias without attention_bias: the MLP's biases are not counted (about d_ff + h "
          "per layer, more with a gated MLP)");
    }
  } else {
    m.linear_bias = true;  // GPT-2, GPT-J, GPT-NeoX, Phi, BLOOM
  }
  const auto tied = in.boolean("tie_word_embeddings");
  m.tied_embeddings = tied.value_or(default_tying(type));
  if (!tied) {
    r.defaults.push_back(fmt::format("tied embeddings = {}: the {} default",
                                     m.tied_embeddings ? "true" : "false",
                                     r.known_type ? type : std::string("llama")));
  }

  // What the importer cannot model, said out loud.
  if (type == "opt") {
    const auto proj = in.integer({"word_embed_proj_dim"});
    if (proj && *proj != m.h) {
      r.warnings.push_back(fmt::format(
          "word_embed_proj_dim = {} differs from h = {}: the projection matrices are not counted",
          *proj, m.h));
    }
  }
  if (in.boolean("qk_layernorm").value_or(false)) {
    r.warnings.push_back("qk_layernorm: the per-head Q/K norms are not counted (a few K params)");
  }
  if (c.contains("quantization_config")) {
    in.use("quantization_config");
    r.warnings.push_back("quantization_config: weights are analysed in the compute dtype");
  }

  const auto torch_dtype = in.text({"torch_dtype", "dtype"});
  m.dtype = DType::bf16;
  if (torch_dtype) {
    try {
      m.dtype = parse_dtype(*torch_dtype);
    } catch (const InvalidArgument&) {
      r.defaults.push_back(
          fmt::format("dtype = bf16: torch_dtype '{}' is not a GEMM dtype", *torch_dtype));
    }
  } else {
    r.defaults.push_back("dtype = bf16: no torch_dtype");
  }
  // Flash attention for every imported config, as for the modern presets.
  m.attention = AttentionImpl::flash;
  r.defaults.push_back("attention = flash (set --attention unfused for the BMM path)");

  std::vector<std::string> unknown;
  for (const auto& [key, value] : c.items()) {
    if (in.was_used(key)) continue;
    if (irrelevant_key(key)) {
      r.ignored.push_back(key);
    } else {
      unknown.push_back(key);
    }
  }
  if (!unknown.empty()) {
    std::string list;
    for (const auto& k : unknown)
      list += (list.empty() ? "" : ", ") + k;
    r.warnings.push_back(
        fmt::format("keys not read (check they do not change the shape): {}", list));
    r.ignored.insert(r.ignored.end(), unknown.begin(), unknown.end());
  }
  try {
    m.validate();
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: {}", in.context(), e.what()));
  }
  // A class default set a field, not a key of the file (it is listed under defaults).
  std::erase_if(r.used, [&config](const std::string& key) { return !config.contains(key); });
  r.shape = std::move(m);
  return r;
}

}  // namespace

ModelShape from_hf_config(const json& config) {
  return import_hf_config(config).shape;
}

HfImport import_hf_config_file(const std::filesystem::path& path, std::string_view field) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument(fmt::format("{} '{}' cannot be opened", field, path.string()));
  try {
    return import_hf_config(json::parse(in));
  } catch (const json::exception& e) {
    throw InvalidArgument(fmt::format("{} '{}': {}", field, path.string(), e.what()));
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{} '{}': {}", field, path.string(), e.what()));
  }
}

ModelShape load_hf_config(const std::filesystem::path& path, std::string_view field) {
  return import_hf_config_file(path, field).shape;
}

}  // namespace mcr::codesign
