#include "runtime/init_inputs.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/backend.hpp"
#include "core/log.hpp"
#include "core/text.hpp"
#include "mcr/comm/info.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

std::string join(const std::vector<std::string>& items, std::string_view sep = ", ") {
  std::string out;
  for (const auto& i : items)
    out += fmt::format("{}{}", out.empty() ? "" : sep, i);
  return out;
}

std::string read_rules_file(const std::string& path, std::string_view source) {
  std::ifstream in(path);
  if (!in) {
    throw InvalidArgument(fmt::format("{}='{}': the rules file cannot be opened", source, path));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs a parser and puts the input's name in front of its message.
template <class F>
auto named(std::string_view source, F&& parse) {
  try {
    return parse();
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: {}", source, e.what()));
  }
}

}  // namespace

std::chrono::milliseconds resolve_timeout(const InitOptions& o) {
  if (o.timeout.count() < 0 || o.timeout > kMaxTimeout) {
    throw InvalidArgument(fmt::format(
        "InitOptions::timeout = {} ms is outside [1 ms, {} ms (1 week)]; 0 means MCR_TIMEOUT or "
        "the default ({} s)",
        o.timeout.count(), kMaxTimeout.count(), kDefaultTimeout.count() / 1000));
  }
  if (o.timeout.count() > 0) return o.timeout;
  if (const auto t = timeout_from_environment()) return *t;
  return kDefaultTimeout;
}

std::chrono::milliseconds parse_timeout_seconds(std::string_view text, std::string_view variable) {
  const std::string_view rule =
      "it must be a number of seconds in [0.001, 604800] (1 ms to 1 week), e.g. 600 or 0.5";
  double seconds = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, seconds);
  if (ec == std::errc::result_out_of_range) {
    throw InvalidArgument(fmt::format("{}='{}' is out of range: {}", variable, text, rule));
  }
  if (text.empty() || ec != std::errc() || ptr != end) {
    throw InvalidArgument(fmt::format("{}='{}' is not a number: {}", variable, text, rule));
  }
  if (!std::isfinite(seconds)) {
    throw InvalidArgument(fmt::format("{}='{}' is not finite: {}", variable, text, rule));
  }
  if (seconds <= 0) {
    throw InvalidArgument(fmt::format("{}='{}' is not positive: {}", variable, text, rule));
  }
  // Below 1 ms a timeout would round to 0, which means "no timeout given": refuse rather than
  // silently change the value.
  if (seconds < 0.001) {
    throw InvalidArgument(fmt::format("{}='{}' is below 1 ms, the resolution of a timeout: {}",
                                      variable, text, rule));
  }
  if (seconds > static_cast<double>(kMaxTimeout.count()) / 1000.0) {
    throw InvalidArgument(fmt::format("{}='{}' exceeds 1 week: {}", variable, text, rule));
  }
  return std::chrono::milliseconds(std::llround(seconds * 1000.0));
}

std::vector<std::string> split_backend_list(std::string_view text) {
  std::vector<std::string> out;
  while (true) {
    const auto comma = text.find(',');
    out.emplace_back(trim(text.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

void check_backend_list(const std::vector<std::string>& names, std::string_view source) {
  const auto& known = backend_names();
  const auto built = compiled_backend_names();
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string& n = names[i];
    if (n.empty()) {
      throw InvalidArgument(
          fmt::format("{}: item {} is empty; list backend names separated by commas (known: {})",
                      source, i + 1, join(known)));
    }
    if (std::find(known.begin(), known.end(), n) == known.end()) {
      throw InvalidArgument(
          fmt::format("{}: unknown backend '{}' (known backends: {})", source, n, join(known)));
    }
    if (std::find(built.begin(), built.end(), n) == built.end()) {
      throw InvalidArgument(
          fmt::format("{}: backend '{}' is not compiled into this build (compiled in: {})", source,
                      n, join(built)));
    }
    if (std::find(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(i), n) !=
        names.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw InvalidArgument(fmt::format("{}: backend '{}' is listed twice", source, n));
    }
  }
}

InitInputs read_init_inputs(const InitOptions& options) {
  InitInputs in;
  in.timeout = resolve_timeout(options);

  // Rules: the string form, then a JSON file, concatenated in that order.
  const bool rules_opt = !options.rules.empty();
  const std::string rules_text =
      rules_opt ? options.rules : (env("MCR_RULES") ? env("MCR_RULES") : "");
  const std::string_view rules_name = rules_opt ? "InitOptions::rules" : "MCR_RULES";
  const bool file_opt = !options.rules_file.empty();
  const std::string rules_file =
      file_opt ? options.rules_file : (env("MCR_RULES_FILE") ? env("MCR_RULES_FILE") : "");
  const std::string_view file_name = file_opt ? "InitOptions::rules_file" : "MCR_RULES_FILE";
  auto rules =
      std::make_shared<RuleSet>(named(rules_name, [&] { return RuleSet::parse(rules_text); }));
  if (!rules_file.empty()) {
    const std::string text = read_rules_file(rules_file, file_name);
    auto from_file = named(fmt::format("{}='{}'", file_name, rules_file),
                           [&] { return RuleSet::parse_json(text); });
    rules->rules.insert(rules->rules.end(), from_file.rules.begin(), from_file.rules.end());
  }
  in.rules_source = rules_text.empty() && rules_file.empty()
                        ? "none"
                        : fmt::format("{}{}", rules_text.empty() ? "" : "string",
                                      rules_file.empty() ? "" : " file " + rules_file);
  in.rules = rules;

  // The table is checked in full as it loads (TuningTable::problems, as `mcr tune --validate`).
  const bool table_opt = !options.tuning_file.empty();
  const std::string table_file =
      table_opt ? options.tuning_file : (env("MCR_TUNING") ? env("MCR_TUNING") : "");
  if (!table_file.empty()) {
    in.table = named(table_opt ? "InitOptions::tuning_file" : "MCR_TUNING",
                     [&] { return std::make_shared<TuningTable>(TuningTable::load(table_file)); });
    in.table_source = table_file;
  }

  if (!options.backends.empty()) {
    in.backends = options.backends;
    check_backend_list(in.backends, "InitOptions::backends");
  } else if (const char* b = env("MCR_BACKENDS")) {
    in.backends = split_backend_list(b);
    check_backend_list(in.backends, fmt::format("MCR_BACKENDS='{}'", b));
  }
  return in;
}

void log_skipped_rules(const RuleSet& rules,
                       const std::vector<std::pair<std::string, std::string>>& unusable) {
  if (!debug_enabled()) return;
  const auto built = compiled_backend_names();
  for (std::size_t i = 0; i < rules.rules.size(); ++i) {
    const Rule& r = rules.rules[i];
    std::string why;
    if (std::find(built.begin(), built.end(), r.backend) == built.end()) {
      why = "is not compiled into this build";
    }
    for (const auto& [name, reason] : unusable) {
      if (name == r.backend) why = fmt::format("is not usable here ({})", reason);
    }
    if (!why.empty()) {
      log_debug("rule #{} ({}): backend {} {}; the rule is skipped", i + 1,
                RuleSet{{r}}.canonical(), r.backend, why);
    }
  }
}

ConfigDigest make_config_digest(const InitInputs& in, const std::vector<std::string>& bring_up) {
  ConfigDigest d;
  const std::string none = "(none)";
  d.fields.emplace_back("mcr version", version());
  d.fields.emplace_back("backends compiled in", join(compiled_backend_names(), ","));
  d.fields.emplace_back(
      "MCR_BACKENDS / InitOptions::backends",
      in.backends.empty() ? "(unset: every compiled backend)" : join(in.backends, ","));
  // Usability is decided per process (a GPU, an MPI launch): ranks that would bring up different
  // sets would wait for each other inside the first backend only some of them create.
  d.fields.emplace_back("backends usable here", join(bring_up, ","));
  d.fields.emplace_back("selection rules (MCR_RULES, MCR_RULES_FILE)",
                        in.rules && !in.rules->empty() ? in.rules->canonical() : none);
  // The table is compared by the hash of what selection reads, so the same table under different
  // paths (a node-local copy) agrees; the path is shown when they differ.
  const std::string table_key = "tuning table (MCR_TUNING)";
  if (in.table) {
    d.fields.emplace_back(table_key, fmt::format("{:016x}", in.table->selection_hash()));
    d.shown[table_key] =
        fmt::format("hash {:016x} from {}", in.table->selection_hash(), in.table_source);
  } else {
    d.fields.emplace_back(table_key, none);
  }
  return d;
}

std::string format_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
      ++j;
    out += out.empty() ? "" : ",";
    out += j > i ? fmt::format("{}-{}", ranks[i], ranks[j]) : fmt::format("{}", ranks[i]);
    i = j + 1;
  }
  return out;
}

std::string describe_differences(const std::vector<ConfigDigest>& digests) {
  auto who = [](const std::vector<int>& r) {
    return fmt::format("{} {}", r.size() == 1 ? "rank" : "ranks", format_ranks(r));
  };
  if (digests.empty()) return {};
  std::vector<std::string> differences;
  const auto& first = digests.front().fields;
  for (std::size_t f = 0; f < first.size(); ++f) {
    const std::string& what = first[f].first;
    // Ranks grouped by value, in order of first appearance.
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    for (std::size_t r = 0; r < digests.size(); ++r) {
      const auto& fields = digests[r].fields;
      const std::string value = f < fields.size() && fields[f].first == what
                                    ? fields[f].second
                                    : std::string("(not reported)");
      auto g = std::find_if(groups.begin(), groups.end(),
                            [&](const auto& x) { return x.first == value; });
      if (g == groups.end()) {
        groups.push_back({value, {static_cast<int>(r)}});
      } else {
        g->second.push_back(static_cast<int>(r));
      }
    }
    if (groups.size() == 1) continue;
    std::string line = fmt::format("{} differs:", what);
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const auto& [value, ranks] = groups[g];
      const auto& d = digests[static_cast<std::size_t>(ranks.front())];
      const auto shown = d.shown.find(what);
      line += fmt::format("{} {} {} '{}'", g == 0 ? "" : ",", who(ranks),
                          ranks.size() == 1 ? "has" : "have",
                          shown != d.shown.end() ? shown->second : value);
    }
    differences.push_back(std::move(line));
  }
  return join(differences, "; ");
}

void check_config_agrees(Exchange& exchange, int rank, const ConfigDigest& mine) {
  nlohmann::json j;
  j["error"] = mine.error;
  j["fields"] = nlohmann::json::array();
  for (const auto& [what, value] : mine.fields) {
    const auto s = mine.shown.find(what);
    j["fields"].push_back({what, value, s != mine.shown.end() ? s->second : std::string()});
  }
  const std::string text = j.dump();
  const auto gathered = exchange.all_gather(to_bytes(text));
  std::vector<ConfigDigest> all;
  for (std::size_t r = 0; r < gathered.size(); ++r) {
    ConfigDigest d;
    try {
      const auto doc = nlohmann::json::parse(gathered[r].begin(), gathered[r].end());
      d.error = doc.at("error").get<std::string>();
      for (const auto& f : doc.at("fields")) {
        d.fields.emplace_back(f.at(0).get<std::string>(), f.at(1).get<std::string>());
        if (!f.at(2).get<std::string>().empty())
          d.shown[f.at(0).get<std::string>()] = f.at(2).get<std::string>();
      }
    } catch (const nlohmann::json::exception& e) {
      // Only a different mcr build can send something else.
      d.fields.clear();
      d.fields.emplace_back("mcr version",
                            fmt::format("(an unreadable configuration digest: {})", e.what()));
    }
    all.push_back(std::move(d));
  }
  if (!mine.error.empty()) return;  // the caller raises its own error
  // A rank whose configuration was rejected has no fields to compare; its peers say who failed.
  std::vector<int> rejected;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (!all[r].error.empty()) rejected.push_back(static_cast<int>(r));
  }
  if (!rejected.empty()) {
    throw InvalidArgument(fmt::format(
        "init: the configuration of {} {} was rejected, so no rank can start (rank {} reported: "
        "{}); the configuration of this rank ({}) is valid",
        rejected.size() == 1 ? "rank" : "ranks", format_ranks(rejected), rejected.front(),
        all[static_cast<std::size_t>(rejected.front())].error, rank));
  }
  if (const std::string differ = describe_differences(all); !differ.empty()) {
    throw MismatchError(fmt::format(
        "init: ranks disagree on what must be identical everywhere, so no backend was brought "
        "up: {}. Every rank must use the same mcr build, MCR_BACKENDS, MCR_RULES, MCR_RULES_FILE, "
        "MCR_TUNING content and MCR_HIER, and MCR_LOG on every rank or none",
        differ));
  }
}

}  // namespace mcr::detail

namespace mcr {

std::optional<std::chrono::milliseconds> timeout_from_environment() {
  if (const char* t = detail::env("MCR_TIMEOUT")) {
    return detail::parse_timeout_seconds(t, "MCR_TIMEOUT");
  }
  return std::nullopt;
}

}  // namespace mcr
