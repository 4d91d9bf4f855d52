#include "mcr/gemmbench/range.hpp"

#include <fmt/core.h>

#include <charconv>
#include <string>

#include "mcr/errors.hpp"

namespace mcr::codesign::bench {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

std::int64_t parse_positive(std::string_view token, std::string_view item,
                            std::string_view argument, std::string_view what) {
  token = trim(token);
  std::int64_t value = 0;
  const auto* end = token.data() + token.size();
  auto [ptr, ec] = std::from_chars(token.data(), end, value);
  if (ec == std::errc::result_out_of_range && ptr == end) {
    throw InvalidArgument(
        token.front() == '-'
            ? fmt::format("{}: {} {} in '{}' must be positive", argument, what, token, item)
            : fmt::format("{}: {} '{}' in '{}' exceeds the largest integer, 2^63-1", argument, what,
                          token, item));
  }
  if (token.empty() || ec != std::errc{} || ptr != end) {
    throw InvalidArgument(
        fmt::format("{}: '{}' in '{}' is not an integer ({} must be a whole number)", argument,
                    token, item, what));
  }
  if (value <= 0) {
    throw InvalidArgument(
        fmt::format("{}: {} {} in '{}' must be positive", argument, what, value, item));
  }
  return value;
}

void append_item(std::string_view item, std::string_view argument, std::vector<std::int64_t>& out) {
  const auto first_colon = item.find(':');
  if (first_colon == std::string_view::npos) {
    out.push_back(parse_positive(item, item, argument, "value"));
    return;
  }
  const auto second_colon = item.find(':', first_colon + 1);
  const auto start = parse_positive(item.substr(0, first_colon), item, argument, "range start");
  const auto end_text = second_colon == std::string_view::npos
                            ? item.substr(first_colon + 1)
                            : item.substr(first_colon + 1, second_colon - first_colon - 1);
  const auto stop = parse_positive(end_text, item, argument, "range end");
  std::int64_t step = 1;
  if (second_colon != std::string_view::npos) {
    const auto step_text = item.substr(second_colon + 1);
    if (step_text.find(':') != std::string_view::npos) {
      throw InvalidArgument(fmt::format(
          "{}: '{}' has more than two ':' (expected start:end or start:end:step)", argument, item));
    }
    step = parse_positive(step_text, item, argument, "range step");
  }
  if (start > stop) {
    throw InvalidArgument(fmt::format("{}: range '{}' has start {} greater than end {}", argument,
                                      item, start, stop));
  }
  const auto count = static_cast<std::size_t>((stop - start) / step) + 1;
  if (out.size() + count > kMaxDimValues) {
    throw InvalidArgument(
        fmt::format("{}: '{}' expands to more than {} values", argument, item, kMaxDimValues));
  }
  // By index: `v += step` past the last value could overflow near INT64_MAX and never end.
  for (std::size_t i = 0; i < count; ++i)
    out.push_back(start + static_cast<std::int64_t>(i) * step);
}

}  // namespace

std::vector<std::int64_t> parse_dim_values(std::string_view text, std::string_view argument) {
  std::vector<std::int64_t> values;
  if (trim(text).empty()) {
    throw InvalidArgument(
        fmt::format("{}: empty value (expected e.g. 128 or 64,128 or 64:512:64)", argument));
  }
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const auto comma = text.find(',', pos);
    const auto item = trim(
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
    if (item.empty()) {
      throw InvalidArgument(fmt::format("{}: empty item in '{}'", argument, text));
    }
    append_item(item, argument, values);
    if (values.size() > kMaxDimValues) {
      throw InvalidArgument(
          fmt::format("{}: '{}' expands to more than {} values", argument, text, kMaxDimValues));
    }
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return values;
}

}  // namespace mcr::codesign::bench
