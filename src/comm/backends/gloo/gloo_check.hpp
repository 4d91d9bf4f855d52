// Turns every exception thrown by a gloo call into an mcr exception that names the gloo call, the
// file:line of the call site, the rank and the operation, followed by gloo's own message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mcr::detail {

/// Where a gloo call was made from, for error messages.
struct GlooCallSite {
  std::string_view op;         ///< "all_reduce", "rendezvous", ...
  std::uint64_t sequence = 0;  ///< the operation's sequence number (0 outside operations)
  int rank = -1;               ///< rank in the gloo context
};

/// Rethrows the exception in flight: mcr::Error unchanged; a gloo timeout as mcr::TimeoutError
/// (backend "gloo"); every other exception as mcr::BackendError.
[[noreturn]] void rethrow_gloo_error(std::string_view call, const char* file, int line,
                                     const GlooCallSite& site);

/// Installs, once per process, a terminate handler for an exception that escapes gloo's own I/O
/// thread, which no caller can catch: gloo's TCP pair raises one when a peer sends more bytes than
/// the posted operation holds (ranks disagree on count or dtype), and the process cannot continue.
/// The handler prints what happened and what it means (naming `rank`, the world rank) and ends the
/// whole job through the launcher (MPI_Abort) so that peers do not wait for their timeout. Any
/// other exception goes to the handler that was installed before.
void install_gloo_io_guard(int rank);

/// The address gloo's TCP device of each world rank listens on ("[10.0.0.2]:41234"), as gloo names
/// a peer in its errors; set once the world's Gloo backend is up, so that an error about a lost
/// peer names its rank too.
void set_gloo_peer_addresses(std::vector<std::string> by_world_rank);
/// The world rank whose address appears in `what`, or -1.
int gloo_peer_rank_in(std::string_view what);

}  // namespace mcr::detail

/// Runs the statement(s) and converts any exception with rethrow_gloo_error().
#define MCR_GLOO_CHECK(site, ...)                                                  \
  do {                                                                             \
    try {                                                                          \
      __VA_ARGS__;                                                                 \
    } catch (...) {                                                                \
      ::mcr::detail::rethrow_gloo_error(#__VA_ARGS__, __FILE__, __LINE__, (site)); \
    }                                                                              \
  } while (0)
