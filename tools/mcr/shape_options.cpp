#include "shape_options.hpp"

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <fstream>

#include "mcr/errors.hpp"

namespace mcr::cli {

void add_model_options(CLI::App* cmd, ModelFlags& f) {
  cmd->add_option("--preset", f.preset, "model preset, e.g. gpt3-2.7b, pythia-6.9b, llama-2-7b");
  cmd->add_option("--config", f.hf_config, "Hugging Face config.json of the model");
  cmd->add_option("--model", f.model_file, "model JSON (fields as in data/models/*.json)");
  // No "--h" alias: newer CLI11 treats it as a clash with -h (help).
  cmd->add_option("--hidden", f.h, "hidden size h");
  cmd->add_option("--heads,--a", f.a, "attention heads a");
  cmd->add_option("--kv-heads", f.a_kv, "key/value heads a_kv (GQA; default a)");
  cmd->add_option("--layers,--L", f.L, "layers L");
  cmd->add_option("--vocab,--v", f.v, "vocabulary size v");
  cmd->add_option("--seq,--s", f.s, "sequence length s");
  cmd->add_option("--micro-batch,--b", f.b, "microbatch size b");
  cmd->add_option("--ffn,--d-ff", f.d_ff, "MLP width d_ff (default 4h)");
  cmd->add_option("--mlp", f.mlp, "MLP type: gelu, swiglu or geglu");
  cmd->add_option("--experts", f.experts, "MoE experts (1 = dense)");
  cmd->add_option("--top-k", f.top_k, "MoE experts per token");
  cmd->add_option("--tp,--t", f.t, "tensor-parallel size t");
  cmd->add_option("--dtype", f.dtype, "fp32, tf32, fp16, bf16, fp8");
  cmd->add_option("--attention", f.attention, "attention implementation: unfused (bmm) or flash");
  cmd->add_option("--norm", f.norm, "layernorm or rmsnorm (parameter count only)");
  cmd->add_option("--position", f.position, "learned, rotary or alibi (parameter count only)");
  cmd->add_option("--tied", f.tied, "tied input/output embeddings (true/false)");
  cmd->add_option("--bias", f.bias, "linear layers have biases (true/false)");
}

codesign::ModelShape build_model(const ModelFlags& flags) {
  return build_model_noted(flags).shape;
}

BuiltModel build_model_noted(const ModelFlags& f) {
  using namespace codesign;
  const int sources = !f.preset.empty() + !f.hf_config.empty() + !f.model_file.empty();
  if (sources > 1) {
    throw InvalidArgument("give at most one of --preset, --config and --model");
  }
  BuiltModel built;
  ModelShape& m = built.shape;
  if (!f.preset.empty()) {
    m = load_preset(f.preset);
    built.source = fmt::format("preset {} (data/models/{}.json)", f.preset, f.preset);
    built.defaults.push_back(
        fmt::format("s = {}, b = {}, dtype = {}, attention = {}: the preset's values", m.s, m.b,
                    to_string(m.dtype), to_string(m.attention)));
  } else if (!f.hf_config.empty()) {
    HfImport r = import_hf_config_file(f.hf_config);
    m = r.shape;
    built.source = fmt::format("config {} (model_type '{}'{})", f.hf_config, r.model_type,
                               r.known_type ? "" : ", not a known family");
    built.defaults = std::move(r.defaults);
    built.warnings = std::move(r.warnings);
    built.ignored = std::move(r.ignored);
    built.used = std::move(r.used);
  } else if (!f.model_file.empty()) {
    std::ifstream in(f.model_file);
    if (!in) throw InvalidArgument(fmt::format("--model '{}' cannot be opened", f.model_file));
    try {
      m = nlohmann::json::parse(in).get<ModelShape>();
    } catch (const nlohmann::json::exception& e) {
      throw InvalidArgument(fmt::format("--model '{}': {}", f.model_file, e.what()));
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(fmt::format("--model '{}': {}", f.model_file, e.what()));
    }
    built.source = fmt::format("model file {}", f.model_file);
  } else {
    m.name = "custom";
    built.source = "flags";
    // The same defaults as a config import: training length and flash attention.
    m.s = kDefaultConfigSeq;
    m.attention = AttentionImpl::flash;
    // Every value not given is said, the parameter count's too: a shape of flags alone counts
    // learned positions and LayerNorm biases, which a Llama-style user did not mean.
    auto& d = built.defaults;
    if (!f.s) d.push_back(fmt::format("s = {} (default; set --seq)", m.s));
    if (!f.b) d.push_back(fmt::format("b = {} (default; set --micro-batch)", m.b));
    if (!f.dtype) d.push_back(fmt::format("dtype = {} (default; set --dtype)", to_string(m.dtype)));
    if (!f.attention) d.push_back("attention = flash (default; set --attention)");
    if (!f.norm) d.push_back(fmt::format("norm = {} (default; set --norm)", to_string(m.norm)));
    if (!f.position) {
      d.push_back(fmt::format("positions = {} (default; set --position)", to_string(m.position)));
    }
    if (!f.tied) {
      d.push_back(fmt::format("tied embeddings = {} (default; set --tied)", m.tied_embeddings));
    }
    if (!f.bias)
      d.push_back(fmt::format("linear biases = {} (default; set --bias)", m.linear_bias));
  }
  const bool custom = sources == 0;
  const auto parsed = [](const std::optional<std::string>& text, auto parse) {
    return text ? std::optional(parse(*text)) : std::nullopt;
  };
  const ModelOverrides o{.h = f.h,
                         .a = f.a,
                         .a_kv = f.a_kv,
                         .L = f.L,
                         .v = f.v,
                         .s = f.s,
                         .b = f.b,
                         .d_ff = f.d_ff,
                         .experts = f.experts,
                         .top_k = f.top_k,
                         .t = f.t,
                         .mlp = parsed(f.mlp, parse_mlp_type),
                         .dtype = parsed(f.dtype, parse_dtype),
                         .attention = parsed(f.attention, parse_attention_impl),
                         .norm = parsed(f.norm, parse_norm_type),
                         .position = parsed(f.position, parse_position_embedding),
                         .tied_embeddings = f.tied,
                         .linear_bias = f.bias};
  apply_overrides(m, o);
  if (custom && (m.h == 0 || m.a == 0 || m.L == 0 || m.v == 0)) {
    throw InvalidArgument(
        "no model given: use --preset NAME, --config config.json or --model FILE, or give at least "
        "--hidden, --heads, --layers and --vocab");
  }
  // A '*' marks a named model whose dimensions were overridden.
  if (!custom && o.changes_dimensions()) {
    m.name += "*";
  }
  m.validate();
  return built;
}

nlohmann::json inputs_json(const BuiltModel& b) {
  return {{"source", b.source},
          {"defaults", b.defaults},
          {"warnings", b.warnings},
          {"config_keys_used", b.used},
          {"config_keys_ignored", b.ignored}};
}

std::string describe_inputs(const BuiltModel& b) {
  std::string out = fmt::format("Inputs: {}\n", b.source);
  for (const auto& d : b.defaults)
    out += fmt::format("  default: {}\n", d);
  if (!b.used.empty()) {
    std::string used;
    for (const auto& k : b.used)
      used += (used.empty() ? "" : ", ") + k;
    out += fmt::format("  config keys read: {}\n", used);
  }
  if (!b.ignored.empty()) {
    std::string ignored;
    for (const auto& k : b.ignored)
      ignored += (ignored.empty() ? "" : ", ") + k;
    out += fmt::format("  config keys ignored (no effect on GEMMs or parameter counts): {}\n",
                       ignored);
  }
  for (const auto& w : b.warnings)
    out += fmt::format("  warning: {}\n", w);
  return out;
}

std::string describe_model(const codesign::ModelShape& m) {
  using codesign::to_string;
  std::string head =
      m.h % m.a == 0 ? fmt::format("{}", m.h / m.a)
                     : fmt::format("{:.2f}", static_cast<double>(m.h) / static_cast<double>(m.a));
  if (m.d_head > 0) head = fmt::format("{} given", m.d_head);
  if (m.is_mla()) head = fmt::format("{} for Q and K, {} for V", m.qk_head_dim(), m.v_dim());
  std::string s = fmt::format(
      "{}: h={} a={} (head dim {}) a_kv={} L={} v={} s={} b={} d_ff={} {} t={} {} attention={}",
      m.name, m.h, m.a, head, m.kv_heads(), m.L, m.v, m.s, m.b, m.d_ff, to_string(m.mlp), m.t,
      to_string(m.dtype), to_string(m.attention));
  if (m.is_moe()) {
    s += fmt::format(" experts={} top_k={}", m.experts, m.top_k);
    if (m.d_ff_expert > 0) s += fmt::format(" expert d_ff={}", m.d_ff_expert);
    if (m.d_ff_shared > 0) s += fmt::format(" shared d_ff={}", m.d_ff_shared);
    if (m.dense_layers > 0) s += fmt::format(" dense layers={}", m.dense_layers);
  }
  if (m.is_mla()) {
    s += fmt::format(" latent attention (q_lora={} kv_lora={} qk={}+{} v={})", m.q_lora_rank,
                     m.kv_lora_rank, m.qk_nope_dim, m.qk_rope_dim, m.v_head_dim);
  }
  if (m.sliding_layers > 0) {
    s += fmt::format(" sliding window {} on {} layers", m.sliding_window, m.sliding_layers);
  }
  if (m.attention_sinks) s += " sinks";
  s += fmt::format(" {} positions={}", to_string(m.norm), to_string(m.position));
  s += m.tied_embeddings ? " tied" : " untied";
  return s;
}

}  // namespace mcr::cli
