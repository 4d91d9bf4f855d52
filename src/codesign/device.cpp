#include "mcr/codesign/device.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <fstream>

#include "json_util.hpp"
#include "mcr/codesign/paths.hpp"
#include "mcr/errors.hpp"

namespace mcr::codesign {

using detail::optional;
using detail::required;
using nlohmann::json;

bool operator==(const Tile& a, const Tile& b) {
  return a.m == b.m && a.n == b.n && a.efficiency == b.efficiency;
}
bool operator==(const AlignmentTier& a, const AlignmentTier& b) {
  return a.min_bytes == b.min_bytes && a.factor == b.factor;
}
bool operator==(const EfficiencyParams& a, const EfficiencyParams& b) {
  return a.peak_fraction == b.peak_fraction && a.alignment_tiers == b.alignment_tiers &&
         a.k_overhead == b.k_overhead && a.memory_efficiency == b.memory_efficiency &&
         a.launch_overhead_s == b.launch_overhead_s && a.latency_floor_s == b.latency_floor_s;
}
bool operator==(const PredictionError& a, const PredictionError& b) {
  return a.count == b.count && a.median_abs_pct_error == b.median_abs_pct_error &&
         a.p90_abs_pct_error == b.p90_abs_pct_error && a.source == b.source;
}
bool operator==(const DeviceSpec& a, const DeviceSpec& b) {
  return a.name == b.name && a.description == b.description && a.vendor == b.vendor &&
         a.arch == b.arch && a.compute_units == b.compute_units && a.clock_mhz == b.clock_mhz &&
         a.max_clock_mhz == b.max_clock_mhz && a.peak_tflops == b.peak_tflops &&
         a.memory_bandwidth_gbs == b.memory_bandwidth_gbs && a.memory_gb == b.memory_gb &&
         a.l2_bytes == b.l2_bytes && a.alignment_bytes == b.alignment_bytes && a.tiles == b.tiles &&
         a.efficiency == b.efficiency && a.sources == b.sources &&
         a.prediction_error == b.prediction_error;
}

double DeviceSpec::peak_for(DType dtype) const {
  const auto it = peak_tflops.find(dtype);
  if (it == peak_tflops.end() || it->second <= 0) {
    std::string have;
    for (const auto& [dt, value] : peak_tflops) {
      have += (have.empty() ? "" : ", ") + to_string(dt);
    }
    throw InvalidArgument(fmt::format("device '{}' has no dense peak for dtype {} (it has: {})",
                                      name, to_string(dtype), have.empty() ? "none" : have));
  }
  return it->second;
}

bool DeviceSpec::supports(DType dtype) const {
  const auto it = peak_tflops.find(dtype);
  return it != peak_tflops.end() && it->second > 0;
}

int DeviceSpec::alignment_elements(DType dtype) const {
  return std::max(1, alignment_bytes / dtype_bytes(dtype));
}

void DeviceSpec::validate() const {
  const std::string ctx = fmt::format("device '{}'", name);
  const auto positive = [&ctx](const char* field, double value) {
    if (!(value > 0)) {
      throw InvalidArgument(fmt::format("{}: {} = {} must be > 0", ctx, field, value));
    }
  };
  if (name.empty()) throw InvalidArgument("device: field 'name' must not be empty");
  positive("compute_units", compute_units);
  positive("clock_mhz", clock_mhz);
  positive("memory_bandwidth_gbs", memory_bandwidth_gbs);
  if (peak_tflops.empty()) {
    throw InvalidArgument(fmt::format("{}: peak_tflops must list at least one dtype", ctx));
  }
  for (const auto& [dtype, value] : peak_tflops) {
    if (!(value > 0)) {
      throw InvalidArgument(
          fmt::format("{}: peak_tflops.{} = {} must be > 0", ctx, to_string(dtype), value));
    }
  }
  if (alignment_bytes <= 0 || (alignment_bytes & (alignment_bytes - 1)) != 0) {
    throw InvalidArgument(
        fmt::format("{}: alignment_bytes = {} must be a power of two", ctx, alignment_bytes));
  }
  if (tiles.empty()) throw InvalidArgument(fmt::format("{}: tiles must not be empty", ctx));
  for (const auto& tile : tiles) {
    if (tile.m <= 0 || tile.n <= 0 || !(tile.efficiency > 0) || tile.efficiency > 1) {
      throw InvalidArgument(
          fmt::format("{}: tile {}x{} efficiency {}: sizes must be > 0 and efficiency in (0, 1]",
                      ctx, tile.m, tile.n, tile.efficiency));
    }
  }
  const auto& e = efficiency;
  if (!(e.peak_fraction > 0) || e.peak_fraction > 1) {
    throw InvalidArgument(
        fmt::format("{}: efficiency.peak_fraction = {} must be in (0, 1]", ctx, e.peak_fraction));
  }
  if (!(e.memory_efficiency > 0) || e.memory_efficiency > 1) {
    throw InvalidArgument(fmt::format("{}: efficiency.memory_efficiency = {} must be in (0, 1]",
                                      ctx, e.memory_efficiency));
  }
  if (e.k_overhead < 0 || e.launch_overhead_s < 0 || e.latency_floor_s < 0) {
    throw InvalidArgument(fmt::format(
        "{}: efficiency.k_overhead ({}), launch_overhead_s ({}) and latency_floor_s ({}) must be "
        ">= 0",
        ctx, e.k_overhead, e.launch_overhead_s, e.latency_floor_s));
  }
  if (e.alignment_tiers.empty()) {
    throw InvalidArgument(fmt::format("{}: efficiency.alignment_tiers must not be empty", ctx));
  }
  for (const auto& tier : e.alignment_tiers) {
    if (tier.min_bytes <= 0 || !(tier.factor > 0) || tier.factor > 1) {
      throw InvalidArgument(fmt::format(
          "{}: alignment tier min_bytes {} factor {}: min_bytes must be > 0 and factor in (0, 1]",
          ctx, tier.min_bytes, tier.factor));
    }
  }
  if (prediction_error) {
    const PredictionError& pe = *prediction_error;
    if (pe.count == 0 || !(pe.median_abs_pct_error >= 0) ||
        !(pe.p90_abs_pct_error >= pe.median_abs_pct_error) || pe.source.empty()) {
      throw InvalidArgument(fmt::format(
          "{}: prediction_error (count {}, median {}%, p90 {}%, source '{}'): needs count >= 1, "
          "0 <= median <= p90 and a source",
          ctx, pe.count, pe.median_abs_pct_error, pe.p90_abs_pct_error, pe.source));
    }
  }
}

void to_json(json& j, const Tile& t) {
  j = json{{"m", t.m}, {"n", t.n}, {"efficiency", t.efficiency}};
}

void from_json(const json& j, Tile& t) {
  const std::string ctx = "tile " + j.dump();
  t.m = required<int>(j, "m", ctx);
  t.n = required<int>(j, "n", ctx);
  t.efficiency = 1.0;
  optional(j, "efficiency", ctx, t.efficiency);
}

void to_json(json& j, const EfficiencyParams& e) {
  json tiers = json::array();
  for (const auto& tier : e.alignment_tiers) {
    tiers.push_back({{"min_bytes", tier.min_bytes}, {"factor", tier.factor}});
  }
  j = json{{"peak_fraction", e.peak_fraction},
           {"alignment_tiers", tiers},
           {"k_overhead", e.k_overhead},
           {"memory_efficiency", e.memory_efficiency},
           {"launch_overhead_s", e.launch_overhead_s},
           {"latency_floor_s", e.latency_floor_s}};
}

void from_json(const json& j, EfficiencyParams& e) {
  const std::string ctx = "efficiency";
  optional(j, "peak_fraction", ctx, e.peak_fraction);
  optional(j, "k_overhead", ctx, e.k_overhead);
  optional(j, "memory_efficiency", ctx, e.memory_efficiency);
  optional(j, "launch_overhead_s", ctx, e.launch_overhead_s);
  optional(j, "latency_floor_s", ctx, e.latency_floor_s);
  if (j.contains("alignment_tiers")) {
    e.alignment_tiers.clear();
    for (const auto& tier : j.at("alignment_tiers")) {
      const std::string tctx = "alignment tier " + tier.dump();
      e.alignment_tiers.push_back(
          {required<int>(tier, "min_bytes", tctx), required<double>(tier, "factor", tctx)});
    }
  }
  std::sort(
      e.alignment_tiers.begin(), e.alignment_tiers.end(),
      [](const AlignmentTier& x, const AlignmentTier& y) { return x.min_bytes > y.min_bytes; });
}

void to_json(json& j, const PredictionError& e) {
  j = json{{"count", e.count},
           {"median_abs_pct_error", e.median_abs_pct_error},
           {"p90_abs_pct_error", e.p90_abs_pct_error},
           {"source", e.source}};
}

void from_json(const json& j, PredictionError& e) {
  const std::string ctx = "prediction_error";
  e.count = required<std::size_t>(j, "count", ctx);
  e.median_abs_pct_error = required<double>(j, "median_abs_pct_error", ctx);
  e.p90_abs_pct_error = required<double>(j, "p90_abs_pct_error", ctx);
  e.source = required<std::string>(j, "source", ctx);
}

void to_json(json& j, const DeviceSpec& d) {
  json peaks = json::object();
  for (const auto& [dtype, value] : d.peak_tflops)
    peaks[to_string(dtype)] = value;
  j = json{{"name", d.name},
           {"description", d.description},
           {"vendor", d.vendor},
           {"arch", d.arch},
           {"compute_units", d.compute_units},
           {"clock_mhz", d.clock_mhz},
           {"max_clock_mhz", d.max_clock_mhz},
           {"peak_tflops", peaks},
           {"memory_bandwidth_gbs", d.memory_bandwidth_gbs},
           {"memory_gb", d.memory_gb},
           {"l2_bytes", d.l2_bytes},
           {"alignment_bytes", d.alignment_bytes},
           {"tiles", d.tiles},
           {"efficiency", d.efficiency},
           {"sources", d.sources}};
  if (d.prediction_error) j["prediction_error"] = *d.prediction_error;
}

void from_json(const json& j, DeviceSpec& d) {
  if (!j.is_object()) throw InvalidArgument("device: expected a JSON object, got " + j.dump());
  d = DeviceSpec{};
  d.name = required<std::string>(j, "name", "device");
  const std::string ctx = fmt::format("device '{}'", d.name);
  optional(j, "description", ctx, d.description);
  optional(j, "vendor", ctx, d.vendor);
  optional(j, "arch", ctx, d.arch);
  d.compute_units = required<int>(j, "compute_units", ctx);
  d.clock_mhz = required<double>(j, "clock_mhz", ctx);
  optional(j, "max_clock_mhz", ctx, d.max_clock_mhz);
  const json peaks = required<json>(j, "peak_tflops", ctx);
  for (const auto& [key, value] : peaks.items()) {
    if (!value.is_number()) {
      throw InvalidArgument(
          fmt::format("{}: peak_tflops.{} = {} must be a number", ctx, key, value.dump()));
    }
    d.peak_tflops[parse_dtype(key)] = value.get<double>();
  }
  d.memory_bandwidth_gbs = required<double>(j, "memory_bandwidth_gbs", ctx);
  optional(j, "memory_gb", ctx, d.memory_gb);
  optional(j, "l2_bytes", ctx, d.l2_bytes);
  optional(j, "alignment_bytes", ctx, d.alignment_bytes);
  d.tiles = required<std::vector<Tile>>(j, "tiles", ctx);
  if (j.contains("efficiency")) d.efficiency = j.at("efficiency").get<EfficiencyParams>();
  if (j.contains("sources")) {
    for (const auto& [key, value] : j.at("sources").items()) {
      d.sources[key] = value.is_string() ? value.get<std::string>() : value.dump();
    }
  }
  if (j.contains("prediction_error")) {
    d.prediction_error = j.at("prediction_error").get<PredictionError>();
  }
  d.validate();
}

DeviceSpec load_device(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument(fmt::format("device file '{}' cannot be opened", path.string()));
  try {
    return json::parse(in).get<DeviceSpec>();
  } catch (const json::exception& e) {
    throw InvalidArgument(fmt::format("device file '{}': {}", path.string(), e.what()));
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("device file '{}': {}", path.string(), e.what()));
  }
}

void save_device(const DeviceSpec& device, const std::filesystem::path& path) {
  std::ofstream out(path);
  if (!out) throw Error(fmt::format("cannot write device file '{}'", path.string()));
  out << json(device).dump(2) << '\n';
  out.close();  // the buffered bytes are written here: a full disk shows now, not never
  if (!out) throw Error(fmt::format("failed writing device file '{}'", path.string()));
}

std::string peak_source(const DeviceSpec& device, DType dtype) {
  const auto specific = device.sources.find("peak_tflops." + to_string(dtype));
  const auto general = device.sources.find("peak_tflops");
  std::string out = specific != device.sources.end() ? specific->second : "";
  if (general != device.sources.end()) {
    out += (out.empty() ? "" : "; ") + general->second;
  }
  return out.empty() ? "not documented" : out;
}

std::vector<std::string> catalog_devices() {
  std::vector<std::string> names;
  const auto dir = data_dir() / "devices";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

DeviceSpec device_from_catalog(const std::string& name) {
  const auto path = data_dir() / "devices" / (name + ".json");
  if (!std::filesystem::exists(path)) {
    std::string known;
    for (const auto& n : catalog_devices())
      known += (known.empty() ? "" : ", ") + n;
    throw InvalidArgument(
        fmt::format("device.name '{}' is not in the catalog ({}); known devices: {}", name,
                    (data_dir() / "devices").string(), known.empty() ? "none" : known));
  }
  return load_device(path);
}

DeviceSpec resolve_device(const std::string& spec) {
  const bool looks_like_path =
      spec.find('/') != std::string::npos || std::filesystem::path(spec).extension() == ".json";
  return looks_like_path ? load_device(spec) : device_from_catalog(spec);
}

}  // namespace mcr::codesign
