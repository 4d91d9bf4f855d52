// Tuning table: JSON format (docs/tuning-format.md), lookup and validation. A table is checked in
// full whenever it is read, with the same checks `mcr tune --validate` reports.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mcr/comm/info.hpp"
#include "mcr/comm/selection.hpp"
#include "mcr/errors.hpp"
#include "select/json_keys.hpp"

namespace mcr {
namespace {

using nlohmann::json;

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const auto& i : items)
    out += fmt::format("{}{}", out.empty() ? "" : sep, i);
  return out;
}

json bytes_json(std::size_t b) {
  return b == kMaxBytes ? json(nullptr) : json(b);
}

// Written only when known, so that a table without topology reads back byte for byte as before.
void put_topology(json& item, int hosts, int ranks_per_host) {
  if (hosts != 0) item["hosts"] = hosts;
  if (ranks_per_host != 0) item["ranks_per_host"] = ranks_per_host;
}

// Written only when recorded, so that a table of one form reads as it always did.
void put_form(json& item, const std::string& form) {
  if (form != "any") item["form"] = form;
}

bool known_form(std::string_view form) {
  return form == "sync" || form == "async" || form == "any";
}

// The structural half of problems(): every field of the document has the type and value range the
// format allows, so that parse_checked() can read it without a conversion that wraps or truncates
// (nlohmann turns -5 into 2^64-5 when asked for a size_t).
class StructureCheck {
 public:
  explicit StructureCheck(std::vector<std::string>& problems) : problems_(problems) {}

  void document(const json& doc) {
    if (!doc.is_object()) {
      add("the top level must be a JSON object");
      return;
    }
    keys(doc, {"format", "version", "provenance", "entries", "samples"}, "the top level");
    // Compared as JSON: a "format" of another type is a problem to list, not a type error.
    if (!doc.contains("format") || doc["format"] != "mcr-tuning") {
      add(fmt::format("\"format\" must be \"mcr-tuning\" (found {})",
                      doc.contains("format") ? doc["format"].dump() : "none"));
    }
    if (!doc.contains("version") || doc["version"] != TuningTable::kFormatVersion) {
      add(fmt::format("\"version\" must be {} (found {})", TuningTable::kFormatVersion,
                      doc.contains("version") ? doc["version"].dump() : "none"));
    }
    if (doc.contains("provenance") && !doc["provenance"].is_object())
      add("\"provenance\" must be an object");
    const json none = json::array();
    const json& entries = doc.contains("entries") ? doc["entries"] : none;
    if (!entries.is_array() || entries.empty()) add("\"entries\" must be a non-empty array");
    for (std::size_t i = 0; entries.is_array() && i < entries.size(); ++i)
      entry(entries[i], fmt::format("entries[{}]", i));
    const json& samples = doc.contains("samples") ? doc["samples"] : none;
    if (!samples.is_array()) add("\"samples\" must be an array");
    for (std::size_t i = 0; samples.is_array() && i < samples.size(); ++i)
      sample(samples[i], fmt::format("samples[{}]", i));
  }

 private:
  void add(std::string p) { problems_.push_back(std::move(p)); }

  // A misspelt key would be ignored and silently change the meaning (a lost max_bytes is
  // "unbounded"), so every key must be one the format defines.
  void keys(const json& item, std::initializer_list<std::string_view> allowed,
            const std::string& where) {
    for (const auto& [key, value] : item.items()) {
      (void)value;
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        std::string names;
        for (auto a : allowed)
          names += fmt::format("{}{}", names.empty() ? "" : ", ", a);
        add(fmt::format("{}: unknown key '{}' (known: {})", where, key, names));
      }
    }
  }

  void common(const json& item, const std::string& where) {
    if (!item.contains("op") || !item["op"].is_string()) {
      add(fmt::format("{}: missing \"op\" string", where));
    } else if (!parse_op(item["op"].get<std::string>())) {
      add(fmt::format("{}: unknown op '{}'", where, item["op"].get<std::string>()));
    }
    if (item.contains("dtype_class")) {
      const auto& c = item["dtype_class"];
      if (!c.is_string() || (c != "any" && c != "float" && c != "int"))
        add(fmt::format("{}: unknown dtype_class {} (use float, int or any)", where, c.dump()));
    }
    if (item.contains("group_size")) {
      const auto& g = item["group_size"];
      if (!g.is_number_integer() || g.get<long long>() < 0 ||
          g.get<long long>() > std::numeric_limits<int>::max()) {
        add(fmt::format("{}: group_size {} must be an integer >= 0 (0: any size)", where,
                        g.dump()));
      }
    }
    if (item.contains("form")) {
      const auto& f = item["form"];
      if (!f.is_string() || !known_form(f.get<std::string>()))
        add(fmt::format("{}: unknown form {} (use sync, async or any)", where, f.dump()));
    }
    for (const char* field : {"hosts", "ranks_per_host"}) {
      if (!item.contains(field)) continue;
      const auto& v = item[field];
      if (!v.is_number_integer() || v.get<long long>() < 0 ||
          v.get<long long>() > std::numeric_limits<int>::max()) {
        add(fmt::format("{}: {} {} must be an integer >= 1 (0 or absent: any)", where, field,
                        v.dump()));
      }
    }
  }

  void backend(const json& item, const std::string& where) {
    const auto& known = backend_names();
    if (!item.contains("backend") || !item["backend"].is_string()) {
      add(fmt::format("{}: missing \"backend\" string", where));
    } else if (std::find(known.begin(), known.end(), item["backend"].get<std::string>()) ==
               known.end()) {
      add(fmt::format("{}: unknown backend '{}' (known: {})", where,
                      item["backend"].get<std::string>(), join(known, ", ")));
    }
  }

  void bytes(const json& item, const char* field, bool required, bool null_ok,
             const std::string& where) {
    if (!item.contains(field)) {
      if (required) add(fmt::format("{}: missing \"{}\"", where, field));
      return;
    }
    const auto& v = item[field];
    if (v.is_number_unsigned() || (null_ok && v.is_null())) return;
    if (v.is_number_integer()) {
      add(fmt::format("{}: {} {} is negative; a byte count is >= 0", where, field, v.dump()));
    } else if (v.is_number_float()) {
      add(fmt::format("{}: {} {} is not a whole number of bytes in [0, 2^64-1]", where, field,
                      v.dump()));
    } else {
      add(fmt::format("{}: {} {} must be a byte count >= 0{}", where, field, v.dump(),
                      null_ok ? " (or null: unbounded)" : ""));
    }
  }

  void entry(const json& e, const std::string& where) {
    if (!e.is_object()) {
      add(fmt::format("{}: must be an object", where));
      return;
    }
    keys(e, {"op", "dtype_class", "group_size", "hosts", "ranks_per_host", "form", "ranges"},
         where);
    common(e, where);
    if (!e.contains("ranges") || !e["ranges"].is_array()) {
      add(fmt::format("{}: missing \"ranges\" array", where));
      return;
    }
    const auto& ranges = e["ranges"];
    for (std::size_t k = 0; k < ranges.size(); ++k) {
      const auto rw = fmt::format("{}.ranges[{}]", where, k);
      if (!ranges[k].is_object()) {
        add(fmt::format("{}: must be an object", rw));
        continue;
      }
      keys(ranges[k], {"min_bytes", "max_bytes", "backend"}, rw);
      backend(ranges[k], rw);
      bytes(ranges[k], "min_bytes", false, false, rw);
      bytes(ranges[k], "max_bytes", false, true, rw);
    }
  }

  void sample(const json& s, const std::string& where) {
    if (!s.is_object()) {
      add(fmt::format("{}: must be an object", where));
      return;
    }
    keys(s,
         {"op", "dtype_class", "group_size", "hosts", "ranks_per_host", "form", "bytes", "backend",
          "time_us", "in_flight", "source"},
         where);
    common(s, where);
    backend(s, where);
    bytes(s, "bytes", true, false, where);
    // Positive: the planner interpolates latencies between samples in log space.
    if (!s.contains("time_us") || !s["time_us"].is_number() || !(s["time_us"].get<double>() > 0))
      add(fmt::format("{}: \"time_us\" must be a positive number of microseconds, not {}", where,
                      s.contains("time_us") ? s["time_us"].dump() : "none"));
    if (s.contains("in_flight") &&
        !(s["in_flight"].is_number_integer() && s["in_flight"].get<long long>() >= 1 &&
          s["in_flight"].get<long long>() <= std::numeric_limits<int>::max())) {
      add(fmt::format("{}: \"in_flight\" must be a whole number of operations >= 1, not {}", where,
                      s["in_flight"].dump()));
    }
    if (s.contains("source") && s["source"] != "run") {
      add(
          fmt::format("{}: \"source\" must be \"run\" (a latency read from a run's trace) or "
                      "absent (timed by mcr tune), not {}",
                      where, s["source"].dump()));
    }
  }

  std::vector<std::string>& problems_;
};

// Reads a document that StructureCheck passed: every conversion below is known to be in range.
TuningTable parse_checked(const json& doc) {
  TuningTable t;
  t.version = doc.at("version").get<int>();
  if (doc.contains("provenance")) {
    for (auto& [k, v] : doc["provenance"].items())
      t.provenance[k] = v.is_string() ? v.get<std::string>() : v.dump();
  }
  for (const auto& e : doc.at("entries")) {
    TuningEntry entry;
    entry.op = *parse_op(e.at("op").get<std::string>());
    entry.dtype_class = e.value("dtype_class", "any");
    entry.group_size = e.value("group_size", 0);
    entry.hosts = e.value("hosts", 0);
    entry.ranks_per_host = e.value("ranks_per_host", 0);
    entry.form = e.value("form", "any");
    for (const auto& r : e.at("ranges")) {
      const bool bounded = r.contains("max_bytes") && !r["max_bytes"].is_null();
      entry.ranges.push_back(TuningRange{r.value("min_bytes", std::size_t{0}),
                                         bounded ? r["max_bytes"].get<std::size_t>() : kMaxBytes,
                                         r.at("backend").get<std::string>()});
    }
    t.entries.push_back(std::move(entry));
  }
  for (const auto& s : doc.value("samples", json::array())) {
    t.samples.push_back(
        TuningSample{*parse_op(s.at("op").get<std::string>()), s.value("dtype_class", "float"),
                     s.value("group_size", 0), s.at("bytes").get<std::size_t>(),
                     s.at("backend").get<std::string>(), s.at("time_us").get<double>(),
                     s.value("hosts", 0), s.value("ranks_per_host", 0), s.value("form", "any"),
                     s.value("in_flight", 0), s.value("source", "")});
  }
  return t;
}

// At most this many problems go into an exception's message; `mcr tune --validate` lists all.
constexpr std::size_t kProblemsShown = 8;

[[noreturn]] void throw_invalid(const std::vector<std::string>& problems, std::string_view path) {
  std::vector<std::string> shown(
      problems.begin(),
      problems.begin() + static_cast<std::ptrdiff_t>(std::min(problems.size(), kProblemsShown)));
  const std::string more = problems.size() > kProblemsShown
                               ? fmt::format("; and {} more", problems.size() - kProblemsShown)
                               : std::string();
  const std::string file = path.empty() ? std::string() : fmt::format(" '{}'", path);
  throw InvalidArgument(fmt::format(
      "tuning table{} is invalid ({} problem{}; `mcr tune --validate {}` lists them): {}{}", file,
      problems.size(), problems.size() == 1 ? "" : "s",
      path.empty() ? std::string("FILE") : std::string(path), join(shown, "; "), more));
}

TuningTable parse_or_throw(std::string_view text, std::string_view path) {
  json doc;
  std::vector<std::string> problems;
  try {
    doc = detail::parse_json_noting_repeated_keys(text, problems);
  } catch (const json::exception& e) {
    throw_invalid({fmt::format("not valid JSON: {}", e.what())}, path);
  }
  StructureCheck(problems).document(doc);
  if (!problems.empty()) throw_invalid(problems, path);
  TuningTable t = parse_checked(doc);
  problems = t.validate(backend_names());
  if (!problems.empty()) throw_invalid(problems, path);
  return t;
}

}  // namespace

std::vector<std::string> TuningTable::problems(std::string_view text) {
  json doc;
  std::vector<std::string> found;
  try {
    doc = detail::parse_json_noting_repeated_keys(text, found);
  } catch (const json::exception& e) {
    return {fmt::format("not valid JSON: {}", e.what())};
  }
  StructureCheck(found).document(doc);
  if (!found.empty()) return found;
  // Structurally sound: now the semantic checks (gaps, overlaps, duplicates).
  return parse_checked(doc).validate(backend_names());
}

TuningTable TuningTable::parse_json(std::string_view text) {
  return parse_or_throw(text, {});
}

TuningTable TuningTable::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw InvalidArgument(
        fmt::format("tuning table '{}' cannot be opened: {}", path, std::strerror(errno)));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_or_throw(ss.str(), path);
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
    put_topology(je, e.hosts, e.ranks_per_host);
    put_form(je, e.form);
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
    json js{{"op", to_string(s.op)}, {"dtype_class", s.dtype_class}, {"group_size", s.group_size},
            {"bytes", s.bytes},      {"backend", s.backend},         {"time_us", s.time_us}};
    put_topology(js, s.hosts, s.ranks_per_host);
    put_form(js, s.form);
    if (s.in_flight > 0) js["in_flight"] = s.in_flight;
    if (!s.source.empty()) js["source"] = s.source;
    doc["samples"].push_back(std::move(js));
  }
  return doc.dump(indent);
}

void TuningTable::save(const std::string& path) const {
  // Written beside the file and renamed over it: a write that fails (a full disk) leaves the table
  // that was there, which a job's MCR_TUNING may name, whole, and says so.
  const std::string text = to_json() + '\n';
  // A link (a shared table that MCR_TUNING names through it) keeps pointing at the table: the file
  // it names is replaced, not the link.
  std::error_code ec;
  std::string target = path;
  if (std::filesystem::is_symlink(path, ec)) {
    const auto resolved = std::filesystem::weakly_canonical(path, ec);
    if (!ec) target = resolved.string();
  }
  const std::string tmp = fmt::format("{}.tmp.{}", target, ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) {
      throw InvalidArgument(
          fmt::format("tuning table '{}' cannot be written ({})", path, std::strerror(errno)));
    }
    out << text;
    out.close();
    if (!out) {
      const int e = errno;
      std::remove(tmp.c_str());
      throw Error(
          fmt::format("tuning table '{}' not written: writing {} failed ({}); the file "
                      "there is unchanged",
                      path, tmp, std::strerror(e)));
    }
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    throw Error(fmt::format("tuning table '{}' not written: renaming {} over it failed ({})", path,
                            tmp, std::strerror(e)));
  }
}

std::string_view to_string(CallForm form) noexcept {
  return form == CallForm::async ? "async" : "sync";
}

std::string describe(HostShape shape) {
  if (shape.hosts <= 0) return "unknown topology";
  if (shape.ranks_per_host <= 0) return fmt::format("{} hosts, uneven", shape.hosts);
  return fmt::format("{}x{}", shape.hosts, shape.ranks_per_host);
}

std::string TuningEntry::topology() const {
  if (hosts != 0 && ranks_per_host != 0) return fmt::format("{}x{}", hosts, ranks_per_host);
  if (hosts != 0) return fmt::format("{} host{}", hosts, hosts == 1 ? "" : "s");
  if (ranks_per_host != 0) return fmt::format("{} ranks per host", ranks_per_host);
  return "any topology";
}

namespace {

// Whether an entry is for (op, dtype class, group size), topology aside.
bool for_operation(const TuningEntry& e, OpType op, std::string_view cls, int group_size) {
  return e.op == op && (e.group_size == 0 || e.group_size == group_size) &&
         (e.dtype_class == "any" || e.dtype_class == cls);
}

}  // namespace

const TuningEntry* TuningTable::entry_for(OpType op, DType dtype, int group_size, HostShape shape,
                                          CallForm form) const {
  // Most specific wins, most significant first: the topology (each of hosts and ranks per host
  // named), then the call form (the call's own, then "any", then the other one: a table of one
  // form still decides for calls of the other, as before forms were recorded), then the exact
  // group size, then the dtype class.
  const TuningEntry* best = nullptr;
  int best_score = -1;
  const auto cls = dtype_class(dtype);
  const auto own = to_string(form);
  for (const auto& e : entries) {
    if (!for_operation(e, op, cls, group_size) || !e.fits(shape)) continue;
    const int named = (e.hosts != 0 ? 1 : 0) + (e.ranks_per_host != 0 ? 1 : 0);
    const int form_rank = e.form == own ? 2 : e.form == "any" ? 1 : 0;
    const int score =
        named * 16 + form_rank * 4 + (e.group_size != 0 ? 2 : 0) + (e.dtype_class != "any" ? 1 : 0);
    if (score > best_score) best = &e, best_score = score;
  }
  return best;
}

const std::string* TuningTable::lookup(OpType op, DType dtype, int group_size, HostShape shape,
                                       std::size_t bytes, CallForm form) const {
  const TuningEntry* best = entry_for(op, dtype, group_size, shape, form);
  if (best == nullptr) return nullptr;
  auto it = std::upper_bound(best->ranges.begin(), best->ranges.end(), bytes,
                             [](std::size_t b, const TuningRange& r) { return b < r.min_bytes; });
  if (it == best->ranges.begin()) return nullptr;
  --it;
  return bytes <= it->max_bytes ? &it->backend : nullptr;
}

std::string TuningTable::topology_mismatch(OpType op, DType dtype, int group_size,
                                           HostShape shape) const {
  if (entry_for(op, dtype, group_size, shape) != nullptr) return {};
  std::vector<std::string> measured;
  const auto cls = dtype_class(dtype);
  for (const auto& e : entries) {
    if (!for_operation(e, op, cls, group_size)) continue;
    auto t = e.topology();
    if (std::find(measured.begin(), measured.end(), t) == measured.end())
      measured.push_back(std::move(t));
  }
  if (measured.empty()) {
    // None for this group size: a table measured on a world of another size (or used for a
    // subgroup it was not measured for) says so instead of leaving selection to its default.
    std::vector<int> sizes;
    for (const auto& e : entries) {
      if (e.op != op || (e.dtype_class != "any" && e.dtype_class != cls)) continue;
      if (std::find(sizes.begin(), sizes.end(), e.group_size) == sizes.end())
        sizes.push_back(e.group_size);
    }
    if (sizes.empty()) return {};
    std::sort(sizes.begin(), sizes.end());
    return fmt::format("measured with {} ranks, this communicator has {}; not applied",
                       fmt::join(sizes, ", "), group_size);
  }
  return fmt::format("measured on {}, this communicator {}; not applied", join(measured, ", "),
                     shape.hosts <= 0 ? std::string("has an unknown topology")
                                      : fmt::format("is {}", describe(shape)));
}

std::vector<std::string> TuningTable::validate(const std::vector<std::string>& known) const {
  std::vector<std::string> problems;
  auto where_of = [&](std::size_t i) {
    const auto& e = entries[i];
    return fmt::format(
        "entries[{}] ({}, dtype_class {}, group_size {}{}{})", i, to_string(e.op), e.dtype_class,
        e.group_size,
        e.hosts == 0 && e.ranks_per_host == 0
            ? std::string()
            : fmt::format(", hosts {}, ranks_per_host {}", e.hosts, e.ranks_per_host),
        e.form == "any" ? std::string() : fmt::format(", form {}", e.form));
  };
  for (std::size_t n = 0; n < entries.size(); ++n) {
    const auto& e = entries[n];
    const auto where = where_of(n);
    if (e.dtype_class != "any" && e.dtype_class != "float" && e.dtype_class != "int") {
      problems.push_back(fmt::format("{}: unknown dtype_class '{}'", where, e.dtype_class));
    }
    if (e.group_size < 0) {
      problems.push_back(fmt::format("{}: group_size must be >= 0 (0: any size)", where));
    }
    if (!known_form(e.form)) {
      problems.push_back(
          fmt::format("{}: unknown form '{}' (use sync, async or any)", where, e.form));
    }
    if (e.hosts < 0 || e.ranks_per_host < 0) {
      problems.push_back(fmt::format("{}: hosts and ranks_per_host must be >= 1 (0: any)", where));
    } else if (e.hosts != 0 && e.ranks_per_host != 0 && e.group_size != 0 &&
               static_cast<long long>(e.hosts) * e.ranks_per_host != e.group_size) {
      problems.push_back(fmt::format(
          "{}: group_size {} is not hosts x ranks_per_host ({} x {} = {})", where, e.group_size,
          e.hosts, e.ranks_per_host, static_cast<long long>(e.hosts) * e.ranks_per_host));
    }
    if (e.ranges.empty()) problems.push_back(fmt::format("{}: no ranges", where));
    for (std::size_t i = 0; i < e.ranges.size(); ++i) {
      const auto& r = e.ranges[i];
      if (r.min_bytes > r.max_bytes) {
        problems.push_back(
            fmt::format("{}: ranges[{}] [{}, {}] is reversed", where, i, r.min_bytes, r.max_bytes));
      }
      if (!known.empty() && std::find(known.begin(), known.end(), r.backend) == known.end()) {
        problems.push_back(fmt::format("{}: ranges[{}] names unknown backend '{}' (known: {})",
                                       where, i, r.backend, join(known, ", ")));
      }
      if (i == 0 && r.min_bytes != 0) {
        problems.push_back(
            fmt::format("{}: gap: bytes [0, {}] are not covered", where, r.min_bytes - 1));
      }
      if (i > 0) {
        const auto& p = e.ranges[i - 1];
        if (r.min_bytes <= p.max_bytes) {
          problems.push_back(
              fmt::format("{}: overlap: ranges[{}] starts at {} but ranges[{}] ends at {}", where,
                          i, r.min_bytes, i - 1, p.max_bytes));
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
      if (a.op == b.op && a.dtype_class == b.dtype_class && a.group_size == b.group_size &&
          a.hosts == b.hosts && a.ranks_per_host == b.ranks_per_host && a.form == b.form) {
        problems.push_back(
            fmt::format("{}: duplicate entry (entries[{}] has the same op, "
                        "dtype_class, group_size, hosts, ranks_per_host and form)",
                        where_of(j), i));
      }
    }
  }
  return problems;
}

std::uint64_t TuningTable::selection_hash() const {
  std::string canon;
  for (const auto& e : entries) {
    canon += fmt::format("{}|{}|{}", to_string(e.op), e.dtype_class, e.group_size);
    // Only when named, so that a table without topology keeps the hash it always had.
    if (e.hosts != 0 || e.ranks_per_host != 0)
      canon += fmt::format("@{}x{}", e.hosts, e.ranks_per_host);
    if (e.form != "any") canon += fmt::format("~{}", e.form);
    for (const auto& r : e.ranges)
      canon += fmt::format("|{}-{}={}", r.min_bytes, r.max_bytes, r.backend);
    canon += ';';
  }
  return fnv1a(canon);
}

}  // namespace mcr
