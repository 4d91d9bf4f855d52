#include "number_checks.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string>

namespace mcr::cli {

CLI::Validator at_least(double bound, bool whole) {
  const std::string rule = fmt::format("{} >= {}", whole ? "a whole number" : "a number", bound);
  return CLI::Validator(
      [bound, whole, rule](std::string& text) -> std::string {
        double value = 0;
        std::size_t used = 0;
        try {
          value = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size() || !std::isfinite(value)) {
          return fmt::format("'{}' is not a finite number (must be {})", text, rule);
        }
        if (!(value >= bound) || (whole && value != std::floor(value))) {
          return fmt::format("{} must be {}", text, rule);
        }
        return {};
      },
      fmt::format("{} >= {}", whole ? "INT" : "NUMBER", bound));
}

}  // namespace mcr::cli
