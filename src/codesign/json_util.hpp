// Private helpers: read JSON fields with errors that name the field and the problem.
#pragma once

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "mcr/errors.hpp"

namespace mcr::codesign::detail {

template <typename T>
T required(const nlohmann::json& j, const char* field, const std::string& context) {
  if (!j.is_object() || !j.contains(field)) {
    throw InvalidArgument(fmt::format("{}: missing field '{}'", context, field));
  }
  const nlohmann::json& value = j.at(field);
  // nlohmann converts 4096.0 (and 4096.5) to an integer silently; a size must be written as one.
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (!value.is_number_integer()) {
      throw InvalidArgument(
          fmt::format("{}: field '{}' = {} must be an integer", context, field, value.dump()));
    }
    // Nor does it check the range: 3000000000 read as an int wraps to a negative number.
    const bool fits = value.is_number_unsigned()
                          ? value.get<std::uint64_t>() <=
                                static_cast<std::uint64_t>(std::numeric_limits<T>::max())
                          : value.get<std::int64_t>() >=
                                    static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
                                (std::is_unsigned_v<T> ||
                                 value.get<std::int64_t>() <=
                                     static_cast<std::int64_t>(std::numeric_limits<T>::max()));
    if (!fits) {
      throw InvalidArgument(fmt::format("{}: field '{}' = {} is out of range ({} to {})", context,
                                        field, value.dump(), std::numeric_limits<T>::min(),
                                        std::numeric_limits<T>::max()));
    }
  }
  try {
    return value.get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(fmt::format("{}: field '{}' = {} has the wrong type ({})", context, field,
                                      j.at(field).dump(), e.what()));
  }
}

template <typename T>
void optional(const nlohmann::json& j, const char* field, const std::string& context, T& out) {
  if (j.is_object() && j.contains(field) && !j.at(field).is_null()) {
    out = required<T>(j, field, context);
  }
}

// A misspelt key read loosely ("microbatch", "compute_eficiency") would take that field's default,
// and the result would pass as the model's: every key must be one the reader knows.
inline void refuse_unknown_keys(const nlohmann::json& j,
                                std::initializer_list<std::string_view> known,
                                const std::string& context) {
  if (!j.is_object()) {
    throw InvalidArgument(fmt::format("{} must be an object, not {}", context, j.dump()));
  }
  for (const auto& [key, value] : j.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      throw InvalidArgument(
          fmt::format("{}: unknown field '{}' (known: {})", context, key, fmt::join(known, ", ")));
    }
  }
}

}  // namespace mcr::codesign::detail
