// The algorithm of Open MPI's nonblocking all_reduce, chosen per call.
//
// Open MPI runs MPI_Iallreduce in its libnbc component, which takes the binomial algorithm (reduce
// the whole buffer to one rank, then broadcast it, through a temporary buffer of the message's
// size) for every in-place call and on every communicator of fewer than 4 ranks, whatever the
// size (ompi/mca/coll/libnbc/nbc_iallreduce.c, v4.1). From 1 MiB that is 3-5x slower than the
// blocking MPI_Allreduce at 2 ranks (docs/performance/bench-and-tuning.md#libnbc-iallreduce); the
// PyTorch binding issues every operation in the nonblocking form, in place. libnbc reads its
// `coll_libnbc_iallreduce_algorithm` variable at each call, and the variable is writable through
// the MPI tools interface, so mcr asks for Rabenseifner's reduce-scatter and all-gather (3; libnbc
// itself falls back to the ring where the count is below the largest power of two <= ranks) from
// 64 KiB, libnbc's own threshold for its bandwidth algorithms, and for libnbc's own choice (0)
// below. Not where the user chose the algorithm (OMPI_MCA_coll_libnbc_iallreduce_algorithm set,
// or the variable not at its default), nor where the library has no such variable (another MPI).
#pragma once

#include <mpi.h>

#include <cstddef>

namespace mcr::detail {

/// libnbc's value for Rabenseifner's algorithm, and for "the library chooses".
inline constexpr int kLibnbcRabenseifner = 3;
inline constexpr int kLibnbcOwnChoice = 0;
/// From this many bytes a nonblocking all_reduce asks for kLibnbcRabenseifner.
inline constexpr std::size_t kLibnbcBandwidthBytes = 64 * 1024;

/// The value mcr asks libnbc for before a nonblocking all_reduce of `bytes`.
constexpr int libnbc_iallreduce_algorithm_for(std::size_t bytes) noexcept {
  return bytes >= kLibnbcBandwidthBytes ? kLibnbcRabenseifner : kLibnbcOwnChoice;
}

/// Decides once per process, alike on every rank of `world` (a collective over it), whether mcr
/// chooses the algorithm per call; later calls do nothing. Checked MPI calls (BackendError).
void setup_libnbc_iallreduce_choice(MPI_Comm world);
/// Before each MPI_Iallreduce of `bytes`: writes the variable where the wanted value differs from
/// the one written last. Every rank of a communicator passes the same `bytes`, so all ask alike.
void before_iallreduce(std::size_t bytes);

}  // namespace mcr::detail
