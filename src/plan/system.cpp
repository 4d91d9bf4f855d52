#include "mcr/plan/system.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "codesign/json_util.hpp"
#include "mcr/codesign/paths.hpp"
#include "mcr/errors.hpp"

namespace mcr::plan {

namespace {

void check_link(const Link& l, const std::string& field) {
  if (!(l.bandwidth_gbs > 0)) {
    throw InvalidArgument(fmt::format("system field '{}.bandwidth_gbs' is {}: it must be > 0",
                                      field, l.bandwidth_gbs));
  }
  if (l.latency_us < 0) {
    throw InvalidArgument(
        fmt::format("system field '{}.latency_us' is {}: it must be >= 0", field, l.latency_us));
  }
  if (!(l.efficiency > 0 && l.efficiency <= 1)) {
    throw InvalidArgument(fmt::format("system field '{}.efficiency' is {}: it must be in (0, 1]",
                                      field, l.efficiency));
  }
}

void link_to_json(nlohmann::json& j, const Link& l) {
  j = {{"bandwidth_gbs", l.bandwidth_gbs},
       {"latency_us", l.latency_us},
       {"efficiency", l.efficiency},
       {"topology", l.topology}};
}

Link link_from_json(const nlohmann::json& j, const std::string& field) {
  if (!j.is_object())
    throw InvalidArgument(fmt::format("system field '{}' must be an object", field));
  Link l;
  const std::string context = fmt::format("system field '{}'", field);
  codesign::detail::refuse_unknown_keys(
      j, {"bandwidth_gbs", "latency_us", "efficiency", "topology"}, context);
  codesign::detail::optional(j, "bandwidth_gbs", context, l.bandwidth_gbs);
  codesign::detail::optional(j, "latency_us", context, l.latency_us);
  codesign::detail::optional(j, "efficiency", context, l.efficiency);
  codesign::detail::optional(j, "topology", context, l.topology);
  return l;
}

}  // namespace

void SystemSpec::validate() const {
  if (name.empty()) throw InvalidArgument("system field 'name' is empty");
  if (device.empty())
    throw InvalidArgument(fmt::format("system '{}': field 'device' is empty", name));
  if (nodes < 1) {
    throw InvalidArgument(
        fmt::format("system '{}': field 'nodes' is {}: it must be >= 1", name, nodes));
  }
  if (gpus_per_node < 1) {
    throw InvalidArgument(fmt::format("system '{}': field 'gpus_per_node' is {}: it must be >= 1",
                                      name, gpus_per_node));
  }
  if (!(compute_efficiency > 0 && compute_efficiency <= 1)) {
    throw InvalidArgument(
        fmt::format("system '{}': field 'compute_efficiency' is {}: it must be in (0, 1]", name,
                    compute_efficiency));
  }
  if (!(stream_efficiency >= 0 && stream_efficiency <= 1)) {
    throw InvalidArgument(
        fmt::format("system '{}': field 'stream_efficiency' is {}: it must be in (0, 1], or 0 for "
                    "the device's memory efficiency",
                    name, stream_efficiency));
  }
  for (const auto& [dtype, factor] : dtype_efficiency) {
    if (!(factor > 0 && factor <= 1)) {
      throw InvalidArgument(
          fmt::format("system '{}': field 'dtype_efficiency.{}' is {}: it must be in (0, 1]", name,
                      dtype, factor));
    }
  }
  for (const auto& [cls, rate] : elementwise_ns) {
    const auto& known = elementwise_classes();
    if (std::find(known.begin(), known.end(), cls) == known.end()) {
      throw InvalidArgument(
          fmt::format("system '{}': field 'elementwise_ns' has class '{}': it must be one of {}",
                      name, cls, fmt::join(known, ", ")));
    }
    if (!(rate.forward_ns >= 0 && rate.backward_ns >= 0 && std::isfinite(rate.forward_ns) &&
          std::isfinite(rate.backward_ns))) {
      throw InvalidArgument(fmt::format(
          "system '{}': field 'elementwise_ns.{}' is {{forward {}, backward {}}}: both must be "
          "finite and >= 0 (nanoseconds per element)",
          name, cls, rate.forward_ns, rate.backward_ns));
    }
  }
  check_link(intra, "intra");
  check_link(inter, "inter");
}

double SystemSpec::efficiency_of(const std::string& dtype) const {
  const auto it = dtype_efficiency.find(dtype);
  return it == dtype_efficiency.end() ? 1.0 : it->second;
}

const std::vector<std::string>& elementwise_classes() {
  static const std::vector<std::string> classes = {
      "norm", "residual", "activation", "attention", "embedding", "cross_entropy", "optimizer"};
  return classes;
}

void to_json(nlohmann::json& j, const SystemSpec& s) {
  nlohmann::json intra, inter;
  link_to_json(intra, s.intra);
  link_to_json(inter, s.inter);
  j = {{"name", s.name},
       {"description", s.description},
       {"device", s.device},
       {"nodes", s.nodes},
       {"gpus_per_node", s.gpus_per_node},
       {"compute_efficiency", s.compute_efficiency},
       {"intra", intra},
       {"inter", inter},
       {"sources", s.sources}};
  if (s.stream_efficiency > 0) j["stream_efficiency"] = s.stream_efficiency;
  if (!s.dtype_efficiency.empty()) j["dtype_efficiency"] = s.dtype_efficiency;
  for (const auto& [cls, r] : s.elementwise_ns) {
    j["elementwise_ns"][cls] = {{"forward", r.forward_ns}, {"backward", r.backward_ns}};
  }
}

// Each field read with its name in the error, integers as integers (8.5 GPUs per node is refused,
// not read as 8) and within range.
void from_json(const nlohmann::json& j, SystemSpec& s) {
  using codesign::detail::optional;
  if (!j.is_object()) throw InvalidArgument("a system must be a JSON object");
  const std::string context = "system";
  codesign::detail::refuse_unknown_keys(
      j,
      {"name", "description", "device", "nodes", "gpus_per_node", "compute_efficiency",
       "stream_efficiency", "dtype_efficiency", "elementwise_ns", "intra", "inter", "sources"},
      context);
  optional(j, "name", context, s.name);
  optional(j, "description", context, s.description);
  optional(j, "device", context, s.device);
  optional(j, "nodes", context, s.nodes);
  optional(j, "gpus_per_node", context, s.gpus_per_node);
  optional(j, "compute_efficiency", context, s.compute_efficiency);
  optional(j, "stream_efficiency", context, s.stream_efficiency);
  optional(j, "dtype_efficiency", context, s.dtype_efficiency);
  if (j.contains("elementwise_ns")) {
    if (!j.at("elementwise_ns").is_object())
      throw InvalidArgument("system field 'elementwise_ns' must be an object");
    for (const auto& [cls, r] : j.at("elementwise_ns").items()) {
      const std::string where = fmt::format("system field 'elementwise_ns.{}'", cls);
      codesign::detail::refuse_unknown_keys(r, {"forward", "backward"}, where);
      ElementwiseRate rate{0, 0};
      optional(r, "forward", where, rate.forward_ns);
      optional(r, "backward", where, rate.backward_ns);
      s.elementwise_ns[cls] = rate;
    }
  }
  if (j.contains("intra")) s.intra = link_from_json(j.at("intra"), "intra");
  if (j.contains("inter")) s.inter = link_from_json(j.at("inter"), "inter");
  optional(j, "sources", context, s.sources);
}

SystemSpec load_system(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument(fmt::format("system file '{}' cannot be opened", path.string()));
  try {
    auto s = nlohmann::json::parse(in).get<SystemSpec>();
    s.validate();
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(fmt::format("system file '{}': {}", path.string(), e.what()));
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("system file '{}': {}", path.string(), e.what()));
  }
}

std::vector<std::string> catalog_systems() {
  std::vector<std::string> names;
  const auto dir = codesign::data_dir() / "systems";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

SystemSpec system_from_catalog(const std::string& name) {
  const auto path = codesign::data_dir() / "systems" / (name + ".json");
  if (!std::filesystem::exists(path)) {
    throw InvalidArgument(fmt::format("system.name '{}' is not in the catalog ({}); known: {}",
                                      name, (codesign::data_dir() / "systems").string(),
                                      fmt::join(catalog_systems(), ", ")));
  }
  return load_system(path);
}

SystemSpec resolve_system(const std::string& spec) {
  const bool is_path = spec.find('/') != std::string::npos ||
                       (spec.size() > 5 && spec.substr(spec.size() - 5) == ".json");
  return is_path ? load_system(spec) : system_from_catalog(spec);
}

}  // namespace mcr::plan
