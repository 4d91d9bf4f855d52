// Flags that describe a model for `mcr shape` and its subcommands: a source (preset, Hugging Face
// config.json, or model JSON) plus per-field overrides.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

/// A model plus where its values came from, for the user to check.
struct BuiltModel {
  codesign::ModelShape shape;
  std::string source;                 ///< "preset gpt3-2.7b", "config.json ...", "flags"
  std::vector<std::string> defaults;  ///< values the user did not give, with their origin
  std::vector<std::string> warnings;  ///< keys or types the importer could not model
  std::vector<std::string> ignored;   ///< config keys left out (no effect on GEMMs or counts)
  std::vector<std::string> used;      ///< config keys that set a field
};

/// Builds the model: source first, then overrides; validates. Throws mcr::InvalidArgument.
BuiltModel build_model_noted(const ModelFlags& flags);
/// build_model_noted(flags).shape.
codesign::ModelShape build_model(const ModelFlags& flags);

/// "Inputs" block: source, defaults with their origin, config keys used and ignored, warnings.
std::string describe_inputs(const BuiltModel& built);
/// The same as the "inputs" object of `mcr shape --json`.
nlohmann::json inputs_json(const BuiltModel& built);

/// One line: "gpt3-2.7b: h=2560 a=32 (h/a=80) ...".
std::string describe_model(const codesign::ModelShape& m);

}  // namespace mcr::cli
