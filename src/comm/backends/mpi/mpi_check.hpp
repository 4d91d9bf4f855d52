// Checked MPI calls: a failure raises BackendError naming the call, file:line, rank and MPI's
// message.
#pragma once

#include <mpi.h>

#include <string>

namespace mcr::detail {

/// The message of a failed MPI call: the call, file:line, rank, MPI's error code and text.
std::string mpi_error_message(const char* call, const char* file, int line, int code);
[[noreturn]] void throw_mpi_error(const char* call, const char* file, int line, int code);

}  // namespace mcr::detail

#define MCR_MPI_CHECK(call)                                                   \
  do {                                                                        \
    const int mcr_mpi_rc_ = (call);                                           \
    if (mcr_mpi_rc_ != MPI_SUCCESS) {                                         \
      ::mcr::detail::throw_mpi_error(#call, __FILE__, __LINE__, mcr_mpi_rc_); \
    }                                                                         \
  } while (false)
