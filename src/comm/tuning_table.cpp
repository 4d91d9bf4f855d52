// Tuning table: JSON format (docs/tuning-format.md), lookup and validation.
#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mcr/errors.hpp"
#include "mcr/selection.hpp"

namespace mcr {
namespace {

using nlohmann::json;

OpType op_from(const json& j, std::string_view where) {
  auto name = j.get<std::string>();
  auto op = parse_op(name);
  if (!op) throw InvalidArgument(fmt::format("tuning table: unknown op '{}' in {}", name, where));
  return *op;
}

json bytes_json(std::size_t b) {
  return b == kMaxBytes ? json(nullptr) : json(b);
}
std::size_t bytes_from(const json& j) {
  return j.is_null() ? kMaxBytes : j.get<std::size_t>();
}

}  // namespace

TuningTable TuningTable::parse_json(std::string_view text) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw InvalidArgument(fmt::format("tuning table is not valid JSON: {}", e.what()));
  }
  TuningTable t;
  try {
    if (doc.value("format", "") != "mcr-tuning") {
      throw InvalidArgument("tuning table: \"format\" must be \"mcr-tuning\"");
    }
    t.version = doc.at("version").get<int>();
    if (t.version != kFormatVersion) {
      throw InvalidArgument(
          fmt::format("tuning table: version {} is not supported (this build reads {})", t.version,
                      kFormatVersion));
    }
    if (doc.contains("provenance")) {
      for (auto& [k, v] : doc["provenance"].items()) {
        t.provenance[k] = v.is_string() ? v.get<std::string>() : v.dump();
      }
    }
    for (const auto& e : doc.value("entries", json::array())) {
      TuningEntry entry;
      entry.op = op_from(e.at("op"), "entries");
      entry.dtype_class = e.value("dtype_class", "any");
      entry.group_size = e.value("group_size", 0);
      for (const auto& r : e.at("ranges")) {
        entry.ranges.push_back(
            TuningRange{r.value("min_bytes", std::size_t{0}),
                        r.contains("max_bytes") ? bytes_from(r["max_bytes"]) : kMaxBytes,
                        r.at("backend").get<std::string>()});
      }
      t.entries.push_back(std::move(entry));
    }
    for (const auto& s : doc.value("samples", json::array())) {
      t.samples.push_back(
          TuningSample{op_from(s.at("op"), "samples"), s.value("dtype_class", "float"),
                       s.value("group_size", 0), s.at("bytes").get<std::size_t>(),
                       s.at("backend").get<std::string>(), s.at("time_us").get<double>()});
    }
  } catch (const json::exception& e) {
    throw InvalidArgument(fmt::format("tuning table: malformed: {}", e.what()));
  }
  return t;
}

TuningTable TuningTable::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument(fmt::format("tuning table '{}' cannot be opened", path));
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return parse_json(ss.str());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: {}", path, e.what()));
  }
}

std::string TuningTable::to_json(int indent) const {
  json doc;
  doc["format"] = "mcr-tuning";
  doc["version"] = version;
  doc["provenance"] = json::object();
  for (const auto& [k, v] : provenance)
    doc["provenance"][k] = v;
  doc["entries"] = json::array();
  for (const auto& e : entries) {
    json je{{"op", to_string(e.op)}, {"dtype_class", e.dtype_class}, {"group_size", e.group_size}};
    je["ranges"] = json::array();
    for (const auto& r : e.ranges) {
      je["ranges"].push_back({{"min_bytes", r.min_bytes},
                              {"max_bytes", bytes_json(r.max_bytes)},
                              {"backend", r.backend}});
    }
    doc["entries"].push_back(std::move(je));
  }
  doc["samples"] = json::array();
  for (const auto& s : samples) {
    doc["samples"].push_back({{"op", to_string(s.op)},
                              {"dtype_class", s.dtype_class},
                              {"group_size", s.group_size},
                              {"bytes", s.bytes},
                              {"backend", s.backend},
                              {"time_us", s.time_us}});
  }
  return doc.dump(indent);
}

void TuningTable::save(const std::string& path) const {
  std::ofstream out(path);
  if (!out) throw InvalidArgument(fmt::format("tuning table '{}' cannot be written", path));
  out << to_json() << '\n';
}

const std::string* TuningTable::lookup(OpType op, DType dtype, int group_size,
                                       std::size_t bytes) const {
  // Best entry: exact group size beats "any" (0); exact dtype class beats "any".
  const TuningEntry* best = nullptr;
  int best_score = -1;
  const auto cls = dtype_class(dtype);
  for (const auto& e : entries) {
    if (e.op != op) continue;
    if (e.group_size != 0 && e.group_size != group_size) continue;
    if (e.dtype_class != "any" && e.dtype_class != cls) continue;
    int score = (e.group_size != 0 ? 2 : 0) + (e.dtype_class != "any" ? 1 : 0);
    if (score > best_score) best = &e, best_score = score;
  }
  if (best == nullptr) return nullptr;
  auto it = std::upper_bound(best->ranges.begin(), best->ranges.end(), bytes,
                             [](std::size_t b, const TuningRange& r) { return b < r.min_bytes; });
  if (it == best->ranges.begin()) return nullptr;
  --it;
  return bytes <= it->max_bytes ? &it->backend : nullptr;
}

std::vector<std::string> TuningTable::validate(const std::vector<std::string>& known) const {
  std::vector<std::string> problems;
  for (const auto& e : entries) {
    const auto where = fmt::format("{} (dtype_class {}, group_size {})", to_string(e.op),
                                   e.dtype_class, e.group_size);
    if (e.dtype_class != "any" && e.dtype_class != "float" && e.dtype_class != "int") {
      problems.push_back(fmt::format("{}: unknown dtype_class '{}'", where, e.dtype_class));
    }
    if (e.ranges.empty()) problems.push_back(fmt::format("{}: no ranges", where));
    for (std::size_t i = 0; i < e.ranges.size(); ++i) {
      const auto& r = e.ranges[i];
      if (r.min_bytes > r.max_bytes) {
        problems.push_back(
            fmt::format("{}: range #{} [{}, {}] is reversed", where, i, r.min_bytes, r.max_bytes));
      }
      if (!known.empty() && std::find(known.begin(), known.end(), r.backend) == known.end()) {
        problems.push_back(
            fmt::format("{}: range #{} names unknown backend '{}'", where, i, r.backend));
      }
      if (i == 0 && r.min_bytes != 0) {
        problems.push_back(
            fmt::format("{}: gap: bytes [0, {}] are not covered", where, r.min_bytes - 1));
      }
      if (i > 0) {
        const auto& p = e.ranges[i - 1];
        if (r.min_bytes <= p.max_bytes) {
          problems.push_back(fmt::format("{}: overlap: range #{} starts at {} but #{} ends at {}",
                                         where, i, r.min_bytes, i - 1, p.max_bytes));
        } else if (r.min_bytes != p.max_bytes + 1) {
          problems.push_back(fmt::format("{}: gap: bytes [{}, {}] are not covered", where,
                                         p.max_bytes + 1, r.min_bytes - 1));
        }
      }
      if (i + 1 == e.ranges.size() && r.max_bytes != kMaxBytes) {
        problems.push_back(
            fmt::format("{}: gap: bytes above {} are not covered", where, r.max_bytes));
      }
    }
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    for (std::size_t j = i + 1; j < entries.size(); ++j) {
      const auto& a = entries[i];
      const auto& b = entries[j];
      if (a.op == b.op && a.dtype_class == b.dtype_class && a.group_size == b.group_size) {
        problems.push_back(fmt::format("{} (dtype_class {}, group_size {}): duplicate entry",
                                       to_string(a.op), a.dtype_class, a.group_size));
      }
    }
  }
  return problems;
}

std::uint64_t TuningTable::selection_hash() const {
  std::string canon;
  for (const auto& e : entries) {
    canon += fmt::format("{}|{}|{}", to_string(e.op), e.dtype_class, e.group_size);
    for (const auto& r : e.ranges)
      canon += fmt::format("|{}-{}={}", r.min_bytes, r.max_bytes, r.backend);
    canon += ';';
  }
  return fnv1a(canon);
}

}  // namespace mcr
