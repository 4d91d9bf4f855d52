// The layout and pricing flags of `mcr plan` (--gpus ... --dp-bucket-mb), bound to the fields of
// the planner's request they set.
#pragma once

#include "mcr/plan/request.hpp"

namespace CLI {
class App;
}

namespace mcr::cli {

/// Registers the flags of every plan::PlanRequest field on `cmd`, in the order --help lists them.
void add_layout_flags(CLI::App* cmd, plan::PlanRequest& request);

}  // namespace mcr::cli
