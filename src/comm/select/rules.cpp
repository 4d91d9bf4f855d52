// Parsing of user selection rules (env string or JSON file).
#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/backend.hpp"
#include "core/text.hpp"
#include "mcr/comm/info.hpp"
#include "mcr/comm/selection.hpp"
#include "mcr/errors.hpp"
#include "select/json_keys.hpp"

namespace mcr {
namespace {

using detail::trim;

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names)
    out += fmt::format("{}{}", out.empty() ? "" : ", ", n);
  return out;
}

// A rule may name any backend mcr has, built here or not (a rules file travels between machines);
// a name outside backend_names() is a typo that would otherwise silently never match.
void require_known_backend(std::string_view backend) {
  const auto& known = backend_names();
  if (std::find(known.begin(), known.end(), backend) == known.end()) {
    std::vector<std::string> built;
    for (const auto& f : detail::compiled_backends())
      built.emplace_back(f.name);
    throw InvalidArgument(
        fmt::format("unknown backend '{}' (known backends: {}; compiled into "
                    "this build: {})",
                    backend, join(known), join(built)));
  }
}

// One dtype of a rule. Elsewhere "float" and "int" are C's names of f32 and i32, but a tuning
// table writes its dtype classes so: a rule "all_reduce/float" read as f32 let bf16, f16 and f64
// pass by unnoticed.
std::optional<DType> parse_rule_dtype(std::string_view name) {
  if (name == "float" || name == "int") {
    const bool floating = name == "float";
    throw InvalidArgument(fmt::format(
        "dtype '{}' is ambiguous in a rule: it would name {} only, not the tuning table's class of "
        "{} types; a rule matches one dtype: write {} (or one rule per dtype)",
        name, floating ? "f32" : "i32", floating ? "floating-point" : "integer",
        floating ? "f32" : "i32"));
  }
  return parse_dtype(name);
}

// One rule of the string form; errors give the reason only, RuleSet::parse adds which rule.
Rule parse_rule(std::string_view text) {
  const auto colon = text.find(':');
  const auto eq = text.rfind('=');
  if (colon == std::string_view::npos || eq == std::string_view::npos || eq < colon) {
    throw InvalidArgument("not of the form OP[/DTYPE]:RANGE=BACKEND (e.g. all_reduce:0-64K=mpi)");
  }
  Rule r;
  std::string_view lhs = trim(text.substr(0, colon));
  std::string_view range = trim(text.substr(colon + 1, eq - colon - 1));
  r.backend = std::string(trim(text.substr(eq + 1)));
  if (r.backend.empty()) throw InvalidArgument("names no backend after '='");
  require_known_backend(r.backend);
  if (auto slash = lhs.find('/'); slash != std::string_view::npos) {
    auto dt = trim(lhs.substr(slash + 1));
    r.dtype = parse_rule_dtype(dt);
    if (!r.dtype) throw InvalidArgument(fmt::format("unknown dtype '{}'", dt));
    lhs = trim(lhs.substr(0, slash));
  }
  if (lhs != "*") {
    r.op = parse_op(lhs);
    if (!r.op) throw InvalidArgument(fmt::format("unknown operation '{}'", lhs));
  }
  if (range.empty()) throw InvalidArgument("empty byte range");
  if (range != "*") {
    const auto dash = range.find('-');
    if (dash == std::string_view::npos) {
      r.min_bytes = r.max_bytes = parse_size(range);
    } else {
      auto lo = trim(range.substr(0, dash));
      auto hi = trim(range.substr(dash + 1));
      r.min_bytes = lo.empty() ? 0 : parse_size(lo);
      r.max_bytes = hi.empty() ? kMaxBytes : parse_size(hi);
    }
    if (r.min_bytes > r.max_bytes) {
      throw InvalidArgument(
          fmt::format("range '{}' has its lower bound above its upper bound", range));
    }
  }
  return r;
}

// A byte count of the JSON form: an integer >= 0 or a size string; `null` (max_bytes) = unbounded.
// nlohmann would wrap a negative integer into a huge size_t, so every other type is refused here.
std::size_t json_bytes(const nlohmann::json& v, std::string_view field) {
  if (v.is_number_unsigned()) return v.get<std::size_t>();
  if (v.is_number_integer()) {
    throw InvalidArgument(fmt::format("{} {} is negative; a byte count is >= 0", field, v.dump()));
  }
  if (v.is_number_float()) {
    if (v.get<double>() >= 18446744073709551616.0) {
      throw InvalidArgument(
          fmt::format("{} {} overflows: the largest byte count is 2^64-1", field, v.dump()));
    }
    throw InvalidArgument(fmt::format("{} {} is not a whole number of bytes", field, v.dump()));
  }
  if (v.is_null() && field == "max_bytes") return kMaxBytes;
  if (v.is_string()) {
    try {
      return parse_size(v.get<std::string>());
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(fmt::format("{}: {}", field, e.what()));
    }
  }
  throw InvalidArgument(fmt::format(
      "{} {} must be a byte count (an integer >= 0 or a size such as \"64K\")", field, v.dump()));
}

Rule rule_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw InvalidArgument("must be an object");
  for (const auto& [key, value] : j.items()) {
    (void)value;
    if (key != "op" && key != "dtype" && key != "min_bytes" && key != "max_bytes" &&
        key != "backend") {
      // A misspelt key would silently widen the rule (a lost max_bytes means "unbounded").
      throw InvalidArgument(
          fmt::format("unknown key '{}' (known: op, dtype, min_bytes, max_bytes, backend)", key));
    }
  }
  auto text = [&](const char* key) {
    if (!j[key].is_string()) {
      throw InvalidArgument(fmt::format("\"{}\" {} must be a string", key, j[key].dump()));
    }
    return j[key].get<std::string>();
  };
  if (!j.contains("backend")) throw InvalidArgument("needs a string \"backend\"");
  Rule r;
  r.backend = text("backend");
  require_known_backend(r.backend);
  if (j.contains("op") && text("op") != "*") {
    r.op = parse_op(text("op"));
    if (!r.op) throw InvalidArgument(fmt::format("unknown \"op\" '{}'", text("op")));
  }
  if (j.contains("dtype") && text("dtype") != "*") {
    r.dtype = parse_rule_dtype(text("dtype"));
    if (!r.dtype) throw InvalidArgument(fmt::format("unknown \"dtype\" '{}'", text("dtype")));
  }
  if (j.contains("min_bytes")) r.min_bytes = json_bytes(j["min_bytes"], "min_bytes");
  if (j.contains("max_bytes")) r.max_bytes = json_bytes(j["max_bytes"], "max_bytes");
  if (r.min_bytes > r.max_bytes) {
    throw InvalidArgument(fmt::format("min_bytes {} > max_bytes {}", r.min_bytes, r.max_bytes));
  }
  return r;
}

}  // namespace

std::size_t parse_size(std::string_view text) {
  text = trim(text);
  if (!text.empty() && text.front() == '-') {
    throw InvalidArgument(fmt::format("size '{}' is negative; a byte count is >= 0", text));
  }
  std::size_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) {
    throw InvalidArgument(
        fmt::format("size '{}' overflows: the largest byte count is 2^64-1", text));
  }
  if (ec != std::errc() || ptr == text.data()) {
    throw InvalidArgument(
        fmt::format("size '{}' is not a byte count (e.g. 64, 64K, 1M, 2G)", text));
  }
  std::string_view suffix(ptr, static_cast<std::size_t>(text.data() + text.size() - ptr));
  if (!suffix.empty() &&
      (suffix.front() == '.' || suffix.front() == 'e' || suffix.front() == 'E')) {
    throw InvalidArgument(fmt::format("size '{}' is not a whole number of bytes", text));
  }
  std::size_t mult = 1;
  if (suffix.empty() || suffix == "B") {
    mult = 1;
  } else if (suffix == "K" || suffix == "KB" || suffix == "KiB" || suffix == "k") {
    mult = std::size_t{1} << 10;
  } else if (suffix == "M" || suffix == "MB" || suffix == "MiB" || suffix == "m") {
    mult = std::size_t{1} << 20;
  } else if (suffix == "G" || suffix == "GB" || suffix == "GiB" || suffix == "g") {
    mult = std::size_t{1} << 30;
  } else {
    throw InvalidArgument(fmt::format(
        "size '{}' has an unknown suffix '{}' (use B, K, M or G, optionally KiB/KB etc.)", text,
        suffix));
  }
  if (value > kMaxBytes / mult) {
    throw InvalidArgument(
        fmt::format("size '{}' overflows: the largest byte count is 2^64-1", text));
  }
  return value * mult;
}

std::string format_size(std::size_t bytes) {
  if (bytes == kMaxBytes) return "max";
  if (bytes != 0 && bytes % (std::size_t{1} << 30) == 0) return fmt::format("{}G", bytes >> 30);
  if (bytes != 0 && bytes % (std::size_t{1} << 20) == 0) return fmt::format("{}M", bytes >> 20);
  if (bytes != 0 && bytes % (std::size_t{1} << 10) == 0) return fmt::format("{}K", bytes >> 10);
  return std::to_string(bytes);
}

RuleSet RuleSet::parse(std::string_view text) {
  RuleSet set;
  std::size_t number = 0;
  while (!text.empty()) {
    const auto semi = text.find(';');
    auto item = trim(text.substr(0, semi));
    if (!item.empty()) {
      ++number;
      try {
        set.rules.push_back(parse_rule(item));
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(fmt::format("rule #{} '{}': {}", number, item, e.what()));
      }
    }
    if (semi == std::string_view::npos) break;
    text.remove_prefix(semi + 1);
  }
  return set;
}

RuleSet RuleSet::parse_json(std::string_view json_text) {
  nlohmann::json doc;
  std::vector<std::string> repeated;
  try {
    doc = detail::parse_json_noting_repeated_keys(json_text, repeated);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(fmt::format("rules file is not valid JSON: {}", e.what()));
  }
  if (!repeated.empty()) throw InvalidArgument(fmt::format("rules file: {}", repeated.front()));
  if (!doc.is_object() || !doc.contains("rules")) {
    throw InvalidArgument("rules file: expected an object with a \"rules\" member");
  }
  const auto& rules = doc["rules"];
  if (rules.is_string()) return parse(rules.get<std::string>());
  if (!rules.is_array())
    throw InvalidArgument("rules file: \"rules\" must be an array or a string");
  RuleSet set;
  for (std::size_t i = 0; i < rules.size(); ++i) {
    try {
      set.rules.push_back(rule_from_json(rules[i]));
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(fmt::format("rules[{}] {}: {}", i, rules[i].dump(), e.what()));
    }
  }
  return set;
}

std::string RuleSet::canonical() const {
  std::string out;
  for (const auto& r : rules) {
    if (!out.empty()) out += ';';
    out += r.op ? std::string(to_string(*r.op)) : "*";
    if (r.dtype) out += fmt::format("/{}", to_string(*r.dtype));
    out += ':';
    if (r.min_bytes == 0 && r.max_bytes == kMaxBytes) {
      out += '*';
    } else if (r.max_bytes == kMaxBytes) {
      out += fmt::format("{}-", format_size(r.min_bytes));
    } else {
      out += fmt::format("{}-{}", format_size(r.min_bytes), format_size(r.max_bytes));
    }
    out += '=';
    out += r.backend;
  }
  return out;
}

std::uint64_t fnv1a(std::string_view data, std::uint64_t seed) noexcept {
  std::uint64_t h = seed;
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string_view dtype_class(DType t) noexcept {
  return is_floating(t) ? "float" : "int";
}

}  // namespace mcr
