// The C++ reference of `python -m mcr.torch.bench`: the same operation on the same communicator,
// in the same (asynchronous) form, issued and waited for from C++ on the communication thread,
// with no Python, torch dispatch or thread hand-off.
#pragma once

#include <string>

#include <ATen/ATen.h>

#include "process_group.hpp"

namespace mcr::torch_ext {

/// Seconds per operation (this rank) of `iters` calls of `op` in its asynchronous form, each
/// waited for before the next (as the binding issues it; "all_reduce" in place on
/// `input`; "all_gather" and "all_to_all" from `input` into `output`) after `warmup` untimed ones
/// and a barrier. `backend` forces a backend ("" selects as usual). Runs on the communication
/// thread, after every operation posted before it was issued; the caller releases the GIL.
double time_native(const ProcessGroupMCR& pg, const std::string& op, const at::Tensor& input,
                   const at::Tensor& output, int iters, int warmup, const std::string& backend);

}  // namespace mcr::torch_ext
