#include "select/json_keys.hpp"

#include <cstddef>
#include <set>

#include <fmt/format.h>

namespace mcr::detail {

nlohmann::json parse_json_noting_repeated_keys(std::string_view text,
                                               std::vector<std::string>& repeated) {
  using json = nlohmann::json;
  // The containers being read, outermost first: an object's last key and the keys it has named,
  // an array's index of the element being read.
  struct Open {
    bool array = false;
    std::size_t index = 0;
    std::string key;
    std::set<std::string> keys;
  };
  std::vector<Open> open;
  // Where the innermost open object sits: "entries[0].ranges[1]" (empty: the document itself).
  const auto where = [&] {
    std::string path;
    for (std::size_t i = 0; i + 1 < open.size(); ++i) {
      if (open[i].array) {
        path += fmt::format("[{}]", open[i].index);
      } else {
        path += (path.empty() ? "" : ".") + open[i].key;
      }
    }
    return path;
  };
  const auto element_done = [&] {
    if (!open.empty() && open.back().array) ++open.back().index;
  };
  const json::parser_callback_t note = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        open.push_back({});
        break;
      case json::parse_event_t::array_start:
        open.emplace_back();
        open.back().array = true;
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!open.empty()) open.pop_back();
        element_done();
        break;
      case json::parse_event_t::key:
        if (!open.empty()) {
          Open& o = open.back();
          o.key = parsed.get<std::string>();
          if (!o.keys.insert(o.key).second) {
            const std::string at = where();
            repeated.push_back(
                fmt::format("{}{}\"{}\" given twice in one object (JSON keeps only the last)", at,
                            at.empty() ? "" : ": ", o.key));
          }
        }
        break;
      case json::parse_event_t::value:
        element_done();
        break;
    }
    return true;  // keep everything: the document is the same as json::parse's
  };
  return json::parse(text.begin(), text.end(), note);
}

}  // namespace mcr::detail
