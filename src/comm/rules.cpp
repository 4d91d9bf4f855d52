// Parsing of user selection rules (env string or JSON file).
#include <charconv>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mcr/errors.hpp"
#include "mcr/selection.hpp"

namespace mcr {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

Rule parse_rule(std::string_view text) {
  const auto colon = text.find(':');
  const auto eq = text.rfind('=');
  if (colon == std::string_view::npos || eq == std::string_view::npos || eq < colon) {
    throw InvalidArgument(fmt::format(
        "rules: '{}' is not of the form OP[/DTYPE]:RANGE=BACKEND (e.g. all_reduce:0-64K=mpi)",
        text));
  }
  Rule r;
  std::string_view lhs = trim(text.substr(0, colon));
  std::string_view range = trim(text.substr(colon + 1, eq - colon - 1));
  r.backend = std::string(trim(text.substr(eq + 1)));
  if (r.backend.empty())
    throw InvalidArgument(fmt::format("rules: '{}' names no backend after '='", text));
  if (auto slash = lhs.find('/'); slash != std::string_view::npos) {
    auto dt = trim(lhs.substr(slash + 1));
    r.dtype = parse_dtype(dt);
    if (!r.dtype) throw InvalidArgument(fmt::format("rules: unknown dtype '{}' in '{}'", dt, text));
    lhs = trim(lhs.substr(0, slash));
  }
  if (lhs != "*") {
    r.op = parse_op(lhs);
    if (!r.op)
      throw InvalidArgument(fmt::format("rules: unknown operation '{}' in '{}'", lhs, text));
  }
  if (range.empty()) throw InvalidArgument(fmt::format("rules: empty byte range in '{}'", text));
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
      throw InvalidArgument(fmt::format(
          "rules: range '{}' in '{}' has its lower bound above its upper bound", range, text));
    }
  }
  return r;
}

}  // namespace

std::size_t parse_size(std::string_view text) {
  text = trim(text);
  std::size_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr == text.data()) {
    throw InvalidArgument(
        fmt::format("size '{}' is not a byte count (e.g. 64, 64K, 1M, 2G)", text));
  }
  std::string_view suffix(ptr, static_cast<std::size_t>(text.data() + text.size() - ptr));
  std::size_t mult = 1;
  if (suffix.empty() || suffix == "B") {
    mult = 1;
  } else if (suffix == "K" || suffix == "KB" || suffix == "KiB" || suffix == "k") {
    mult = std::size_t{1} << 10;
  } else if (suffix == "M" || suffix == "MB" || suffix == "MiB") {
    mult = std::size_t{1} << 20;
  } else if (suffix == "G" || suffix == "GB" || suffix == "GiB") {
    mult = std::size_t{1} << 30;
  } else {
    throw InvalidArgument(
        fmt::format("size '{}' has an unknown suffix '{}' (use K, M or G)", text, suffix));
  }
  if (value > kMaxBytes / mult) throw InvalidArgument(fmt::format("size '{}' overflows", text));
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
  while (!text.empty()) {
    const auto semi = text.find(';');
    auto item = trim(text.substr(0, semi));
    if (!item.empty()) set.rules.push_back(parse_rule(item));
    if (semi == std::string_view::npos) break;
    text.remove_prefix(semi + 1);
  }
  return set;
}

RuleSet RuleSet::parse_json(std::string_view json_text) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(fmt::format("rules file is not valid JSON: {}", e.what()));
  }
  if (!doc.is_object() || !doc.contains("rules")) {
    throw InvalidArgument("rules file: expected an object with a \"rules\" member");
  }
  const auto& rules = doc["rules"];
  if (rules.is_string()) return parse(rules.get<std::string>());
  if (!rules.is_array())
    throw InvalidArgument("rules file: \"rules\" must be an array or a string");
  RuleSet set;
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const auto& j = rules[i];
    auto where = [&](std::string_view what) {
      return fmt::format("rules file: rule #{} ({}): {}", i, j.dump(), what);
    };
    if (!j.is_object() || !j.contains("backend") || !j["backend"].is_string()) {
      throw InvalidArgument(where("needs a string \"backend\""));
    }
    Rule r;
    r.backend = j["backend"].get<std::string>();
    try {
      if (j.contains("op") && j["op"].get<std::string>() != "*") {
        r.op = parse_op(j["op"].get<std::string>());
        if (!r.op) throw InvalidArgument(where("unknown \"op\""));
      }
      if (j.contains("dtype")) {
        r.dtype = parse_dtype(j["dtype"].get<std::string>());
        if (!r.dtype) throw InvalidArgument(where("unknown \"dtype\""));
      }
      auto size_of = [&](const nlohmann::json& v) {
        return v.is_string() ? parse_size(v.get<std::string>()) : v.get<std::size_t>();
      };
      if (j.contains("min_bytes")) r.min_bytes = size_of(j["min_bytes"]);
      if (j.contains("max_bytes")) r.max_bytes = size_of(j["max_bytes"]);
    } catch (const nlohmann::json::exception& e) {
      throw InvalidArgument(where(e.what()));
    }
    if (r.min_bytes > r.max_bytes) throw InvalidArgument(where("min_bytes > max_bytes"));
    set.rules.push_back(std::move(r));
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
