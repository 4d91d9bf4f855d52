// Checks shared by the options of the sweep, the comparison and tuning (internal to mcr::bench).
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "mcr/comm/types.hpp"
#include "mcr/errors.hpp"

namespace mcr::bench::detail {

// An empty list would run nothing and report success, which hides a caller's mistake.
inline void require_points(const std::vector<OpType>& ops, const std::vector<std::size_t>& sizes,
                           const std::vector<DType>& dtypes) {
  if (ops.empty()) throw InvalidArgument("options.ops: at least one operation is required");
  if (sizes.empty()) throw InvalidArgument("options.sizes: at least one message size is required");
  if (dtypes.empty())
    throw InvalidArgument("options.dtypes: at least one element type is required");
}

// Every requested backend must be usable on this communicator ("auto" too when `allow_auto`).
inline void require_usable(std::string_view field, const std::vector<std::string>& requested,
                           const std::vector<std::string>& usable, bool allow_auto) {
  for (const auto& b : requested) {
    if (allow_auto && b == "auto") continue;
    if (std::find(usable.begin(), usable.end(), b) == usable.end()) {
      throw InvalidArgument(fmt::format("{} '{}': not usable here (usable: {}{})", field, b,
                                        allow_auto ? "auto, " : "", fmt::join(usable, ", ")));
    }
  }
}

// The root and reduce operator one point of `op` takes on `ranks` ranks (defined in point.cpp,
// where each Point checks them too). A sweep checks every op's before it runs any: a point is built
// only when its group comes, so a bad value would otherwise stop the sweep after others have run.
void check_point_arguments(OpType op, int root, ReduceOp reduce, int ranks);

inline void check_point_arguments(const std::vector<OpType>& ops, int root, ReduceOp reduce,
                                  int ranks) {
  for (OpType op : ops)
    check_point_arguments(op, root, reduce, ranks);
}

}  // namespace mcr::bench::detail
