// JSON documents a user writes by hand (tuning tables, rules files), parsed so that a key given
// twice in one object is found: nlohmann keeps the last value silently, so `"max_bytes": 65535`
// followed by `"max_bytes": null` would mean "unbounded" without a word.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace mcr::detail {

/// Parses `text` (throws nlohmann::json::parse_error as json::parse does) and appends to
/// `repeated` each key that an object of the document names more than once, as
/// `"KEY" given twice in one object (JSON keeps only the last)`.
nlohmann::json parse_json_noting_repeated_keys(std::string_view text,
                                               std::vector<std::string>& repeated);

}  // namespace mcr::detail
