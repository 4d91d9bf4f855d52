// Flags that describe a model for `mcr shape` and its subcommands: a source (preset, Hugging Face
// config.json, or model JSON) plus per-field overrides.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "mcr/codesign/model.hpp"

namespace CLI {
class App;
}

namespace mcr::cli {

struct ModelFlags {
  std::string preset;
  std::string hf_config;
  std::string model_file;
  std::optional<std::int64_t> h, a, a_kv, L, v, s, b, d_ff, experts, top_k, t;
  std::optional<std::string> mlp, dtype, attention, norm, position;
  std::optional<bool> tied, bias;
};

/// Registers --preset, --config, --model and the override flags on `cmd`.
void add_model_options(CLI::App* cmd, ModelFlags& flags);

/// Builds the model: source first, then overrides; validates. Throws mcr::InvalidArgument.
codesign::ModelShape build_model(const ModelFlags& flags);

/// One line: "gpt3-2.7b: h=2560 a=32 (h/a=80) ...".
std::string describe_model(const codesign::ModelShape& m);

}  // namespace mcr::cli
