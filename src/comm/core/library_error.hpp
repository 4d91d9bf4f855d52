// The one form of a failed library call's message (docs/errors.md, BackendError):
// "<call> failed at <file>:<line> (rank <r>, <op>): <name>: <text>[; <more>]". Every backend's
// checked-call file (mpi_check, gloo_check, nccl_check, device/cuda_check) builds its messages
// here, so a log of many ranks and libraries reads one way.
#pragma once

#include <string>
#include <string_view>

namespace mcr::detail {

/// Who made a failing call: printed in every error so a log of many ranks stays readable.
struct CallSite {
  int rank = -1;        ///< -1: unknown ("rank ?")
  std::string_view op;  ///< the operation ("all_reduce", "all_reduce #12") or phase ("init")
};

/// Pure formatting, so it can be tested on its own. `file` is shortened to its base name; `name`
/// is the library's error name or code ("ncclSystemError", "MPI error 15"), `text` its message,
/// `more` what the library adds (NCCL's last error, the peer a Gloo connection lost).
std::string format_call_error(std::string_view call, std::string_view file, int line,
                              const CallSite& site, std::string_view name, std::string_view text,
                              std::string_view more = {});

}  // namespace mcr::detail
