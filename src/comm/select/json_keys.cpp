#include "select/json_keys.hpp"

#include <set>

#include <fmt/format.h>

namespace mcr::detail {

nlohmann::json parse_json_noting_repeated_keys(std::string_view text,
                                               std::vector<std::string>& repeated) {
  using json = nlohmann::json;
  std::vector<std::set<std::string>> open;  // the keys of each object being read, innermost last
  const json::parser_callback_t note = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        open.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!open.empty()) open.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open.empty() && !open.back().insert(parsed.get<std::string>()).second) {
          repeated.push_back(
              fmt::format("\"{}\" given twice in one object (JSON keeps only the last)",
                          parsed.get<std::string>()));
        }
        break;
      default:
        break;
    }
    return true;  // keep everything: the document is the same as json::parse's
  };
  return json::parse(text.begin(), text.end(), note);
}

}  // namespace mcr::detail
