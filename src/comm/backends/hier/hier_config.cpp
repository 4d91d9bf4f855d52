#include "hier_config.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

#include "core/text.hpp"
#include "mcr/comm/info.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail {
namespace {

// A step backend is a flat library: "hier" inside hier would compose forever.
std::string parse_backend(std::string_view key, std::string_view value, std::string_view source) {
  if (value == "auto") return {};
  const auto& known = backend_names();
  std::string flat;
  for (const auto& n : known) {
    if (n != "hier") flat += fmt::format("{}{}", flat.empty() ? "" : ", ", n);
  }
  if (value == "hier" || std::find(known.begin(), known.end(), value) == known.end()) {
    throw InvalidArgument(fmt::format(
        "{}: {}={} names no flat backend; use one of {} or auto (the selector chooses per step)",
        source, key, value, flat));
  }
  return std::string(value);
}

}  // namespace

std::string HierConfig::canonical() const {
  std::string s = fmt::format("intra={};inter={}", intra.empty() ? "auto" : intra,
                              inter.empty() ? "auto" : inter);
  if (simulate_ranks_per_host > 0) {
    s += fmt::format(";simulate_ranks_per_host={}", simulate_ranks_per_host);
  }
  return s;
}

HierConfig parse_hier_config(std::string_view text, std::string_view source) {
  HierConfig c;
  bool seen_intra = false, seen_inter = false, seen_sim = false;
  while (!text.empty()) {
    const auto semi = text.find_first_of(";,");  // ',' too: CMake and shells keep it whole
    const std::string_view item = trim(text.substr(0, semi));
    text = semi == std::string_view::npos ? std::string_view{} : text.substr(semi + 1);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) {
      throw InvalidArgument(fmt::format(
          "{}: item '{}' is not KEY=VALUE (keys: intra, inter, simulate_ranks_per_host)", source,
          item));
    }
    const std::string_view key = trim(item.substr(0, eq));
    const std::string_view value = trim(item.substr(eq + 1));
    auto once = [&](bool& seen) {
      if (seen) throw InvalidArgument(fmt::format("{}: key '{}' appears twice", source, key));
      seen = true;
    };
    if (key == "intra") {
      once(seen_intra);
      c.intra = parse_backend(key, value, source);
    } else if (key == "inter") {
      once(seen_inter);
      c.inter = parse_backend(key, value, source);
    } else if (key == "simulate_ranks_per_host") {
      once(seen_sim);
      int n = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc{} || end != value.data() + value.size() || n < 1) {
        throw InvalidArgument(fmt::format(
            "{}: simulate_ranks_per_host={} must be a whole number >= 1", source, value));
      }
      c.simulate_ranks_per_host = n;
    } else {
      throw InvalidArgument(fmt::format(
          "{}: unknown key '{}' (keys: intra, inter, simulate_ranks_per_host)", source, key));
    }
  }
  return c;
}

HierConfig read_hier_config() {
  const char* v = std::getenv("MCR_HIER");
  if (v == nullptr || *v == '\0') return {};
  return parse_hier_config(v, fmt::format("MCR_HIER='{}'", v));
}

}  // namespace mcr::detail
