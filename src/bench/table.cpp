// Tuning-table construction from measured samples (winner per size with hysteresis, adjacent sizes
// merged) and full validation of a table file's text.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mcr/bench/table.hpp"
#include "mcr/errors.hpp"
#include "mcr/info.hpp"

namespace mcr::bench {
namespace {

struct Key {
  OpType op;
  std::string dtype_class;
  int group_size;
  auto tie() const { return std::tie(op, dtype_class, group_size); }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

// Winner per measured size, walking upwards: the current winner keeps a size unless another backend
// beats it there by more than the margin (or the current one was not measured at that size).
std::vector<std::pair<std::size_t, std::string>> winners(
    const std::map<std::size_t, std::map<std::string, double>>& by_size, double hysteresis) {
  std::vector<std::pair<std::size_t, std::string>> out;
  std::string current;
  for (const auto& [bytes, times] : by_size) {
    auto best = std::min_element(times.begin(), times.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    auto cur = times.find(current);
    if (cur == times.end() || best->second < cur->second * (1.0 - hysteresis))
      current = best->first;
    out.emplace_back(bytes, current);
  }
  return out;
}

}  // namespace

std::vector<TuningEntry> build_entries(const std::vector<TuningSample>& samples,
                                       double hysteresis) {
  if (hysteresis < 0 || hysteresis >= 1) {
    throw InvalidArgument(fmt::format("--hysteresis {}: must be in [0, 1)", hysteresis));
  }
  std::map<Key, std::map<std::size_t, std::map<std::string, double>>> grouped;
  for (const auto& s : samples) {
    if (!(s.time_us > 0) || !std::isfinite(s.time_us)) continue;  // failed or unmeasured points
    auto& slot = grouped[Key{s.op, s.dtype_class, s.group_size}][s.bytes][s.backend];
    slot = slot > 0 ? std::min(slot, s.time_us) : s.time_us;
  }
  std::vector<TuningEntry> entries;
  for (const auto& [key, by_size] : grouped) {
    const auto points = winners(by_size, hysteresis);
    TuningEntry e{key.op, key.dtype_class, key.group_size, {}};
    for (std::size_t i = 0; i < points.size(); ++i) {
      const auto& [bytes, backend] = points[i];
      if (!e.ranges.empty() && e.ranges.back().backend == backend) continue;
      std::size_t lo = 0;
      if (!e.ranges.empty()) {
        // Boundary at the geometric mean of the neighbouring measured sizes.
        const double prev = static_cast<double>(std::max<std::size_t>(points[i - 1].first, 1));
        lo = static_cast<std::size_t>(std::ceil(std::sqrt(prev * static_cast<double>(bytes))));
        lo = std::clamp(lo, points[i - 1].first + 1, bytes);
        e.ranges.back().max_bytes = lo - 1;
      }
      e.ranges.push_back(TuningRange{lo, kMaxBytes, backend});
    }
    if (!e.ranges.empty()) entries.push_back(std::move(e));
  }
  // A message's two ends select independently (send on one rank, recv on the other): they must
  // agree.
  std::vector<TuningEntry> recv;
  for (const auto& e : entries) {
    if (e.op != OpType::send) continue;
    const bool have = std::any_of(entries.begin(), entries.end(), [&](const TuningEntry& o) {
      return o.op == OpType::recv && o.dtype_class == e.dtype_class && o.group_size == e.group_size;
    });
    if (!have) {
      recv.push_back(e);
      recv.back().op = OpType::recv;
    }
  }
  entries.insert(entries.end(), recv.begin(), recv.end());
  return entries;
}

std::vector<std::string> validate_table_text(std::string_view text) {
  using nlohmann::json;
  std::vector<std::string> problems;
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    return {fmt::format("not valid JSON: {}", e.what())};
  }
  if (!doc.is_object()) return {"the top level must be a JSON object"};
  const auto& known = backend_names();
  auto check_common = [&](const json& item, const std::string& where) {
    if (!item.is_object()) {
      problems.push_back(fmt::format("{}: must be an object", where));
      return false;
    }
    if (!item.contains("op") || !item["op"].is_string()) {
      problems.push_back(fmt::format("{}: missing \"op\" string", where));
    } else if (!parse_op(item["op"].get<std::string>())) {
      problems.push_back(fmt::format("{}: unknown op '{}'", where, item["op"].get<std::string>()));
    }
    if (item.contains("dtype_class")) {
      const auto& c = item["dtype_class"];
      if (!c.is_string() || (c != "any" && c != "float" && c != "int")) {
        problems.push_back(
            fmt::format("{}: unknown dtype_class {} (use float, int or any)", where, c.dump()));
      }
    }
    if (item.contains("group_size") &&
        (!item["group_size"].is_number_integer() || item["group_size"].get<long long>() < 0)) {
      problems.push_back(fmt::format("{}: group_size {} must be an integer >= 0", where,
                                     item["group_size"].dump()));
    }
    return true;
  };
  auto check_backend = [&](const json& item, const std::string& where) {
    if (!item.contains("backend") || !item["backend"].is_string()) {
      problems.push_back(fmt::format("{}: missing \"backend\" string", where));
    } else if (std::find(known.begin(), known.end(), item["backend"].get<std::string>()) ==
               known.end()) {
      problems.push_back(fmt::format("{}: unknown backend '{}' (known: mpi, gloo, nccl)", where,
                                     item["backend"].get<std::string>()));
    }
  };
  if (doc.value("format", "") != "mcr-tuning")
    problems.emplace_back("\"format\" must be \"mcr-tuning\"");
  if (!doc.contains("version") || doc["version"] != TuningTable::kFormatVersion) {
    problems.push_back(fmt::format("\"version\" must be {} (found {})", TuningTable::kFormatVersion,
                                   doc.contains("version") ? doc["version"].dump() : "none"));
  }
  const json entries = doc.value("entries", json::array());
  if (!entries.is_array() || entries.empty())
    problems.emplace_back("\"entries\" must be a non-empty array");
  for (std::size_t i = 0; entries.is_array() && i < entries.size(); ++i) {
    const auto where = fmt::format("entries[{}]", i);
    if (!check_common(entries[i], where)) continue;
    if (!entries[i].contains("ranges") || !entries[i]["ranges"].is_array()) {
      problems.push_back(fmt::format("{}: missing \"ranges\" array", where));
      continue;
    }
    const auto& ranges = entries[i]["ranges"];
    for (std::size_t k = 0; k < ranges.size(); ++k) {
      const auto rw = fmt::format("{}.ranges[{}]", where, k);
      if (!ranges[k].is_object()) {
        problems.push_back(fmt::format("{}: must be an object", rw));
        continue;
      }
      check_backend(ranges[k], rw);
      for (const char* f : {"min_bytes", "max_bytes"}) {
        if (ranges[k].contains(f) && !ranges[k][f].is_null() &&
            !ranges[k][f].is_number_unsigned()) {
          problems.push_back(
              fmt::format("{}: {} {} must be a byte count >= 0 (or null for max_bytes)", rw, f,
                          ranges[k][f].dump()));
        }
      }
    }
  }
  const json samples = doc.value("samples", json::array());
  for (std::size_t i = 0; samples.is_array() && i < samples.size(); ++i) {
    const auto where = fmt::format("samples[{}]", i);
    if (!check_common(samples[i], where)) continue;
    check_backend(samples[i], where);
  }
  if (!problems.empty()) return problems;
  // Structurally sound: now the semantic checks (gaps, overlaps, duplicates).
  try {
    return TuningTable::parse_json(text).validate(known);
  } catch (const Error& e) {
    return {e.what()};
  }
}

}  // namespace mcr::bench
