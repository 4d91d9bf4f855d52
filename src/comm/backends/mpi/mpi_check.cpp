#include "backends/mpi/mpi_check.hpp"

#include <fmt/format.h>

#include "core/library_error.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail {
namespace {

int world_rank() noexcept {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  int r = -1;
  if (init && !fin) MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

}  // namespace

std::string mpi_error_message(const char* call, const char* file, int line, int code) {
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  // MPI_Error_string is one of the calls MPI allows only between init and finalize: after a failed
  // MPI_Finalize (which leaves MPI finalized) Open MPI would abort the job in it. The code is named
  // either way.
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init == 0 || fin != 0 || MPI_Error_string(code, msg, &len) != MPI_SUCCESS) len = 0;
  return format_call_error(call, file, line, {world_rank(), {}}, fmt::format("MPI error {}", code),
                           std::string_view(msg, static_cast<std::size_t>(len)));
}

[[noreturn]] void throw_mpi_error(const char* call, const char* file, int line, int code) {
  throw BackendError(mpi_error_message(call, file, line, code));
}

}  // namespace mcr::detail
