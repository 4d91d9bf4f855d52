// Private helpers: read JSON fields with errors that name the field and the problem.
#pragma once

#include <fmt/core.h>

#include <string>
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

}  // namespace mcr::codesign::detail
