// The algorithm of Open MPI's nonblocking all_reduce, chosen per call.
//
// Open MPI runs MPI_Iallreduce in its libnbc component, which takes the binomial algorithm (reduce
// the whole buffer to one rank, then broadcast it, through a temporary buffer of the message's
// size) for every in-place call and on every communicator of fewer than 4 ranks, whatever the
// size (ompi/mca/coll/libnbc/nbc_iallreduce.c, v4.1). From 1 MiB that is 3-5x slower than the
// blocking MPI_Allreduce at 2 ranks (docs/performance/bench-and-tuning.md#libnbc-iallreduce); the
// PyTorch binding issues every operation in the nonblocking form, in place. libnbc reads its
// `coll_libnbc_iallreduce_algorithm` variable at each call, and the variable is writable through
// the MPI tools interface, so mcr asks for Rabenseifner's reduce-scatter and all-gather (3) for an
// in-place call of at least 64 KiB (libnbc's own threshold for its bandwidth algorithms) on a
// communicator whose size is a power of two, and leaves libnbc's own choice (0) everywhere else:
// out of place libnbc picks Rabenseifner itself from 4 ranks, and at 2 and 3 ranks its binomial
// measured faster than Rabenseifner out of place (1.4-1.6x at 2 ranks, 1.5-1.7x at 3 from 16 MiB),
// as it did in place at 3 ranks, where Rabenseifner folds the odd rank in first
// (docs/performance/bench-and-tuning.md#libnbc-iallreduce-place). Not where the user chose the
// algorithm (OMPI_MCA_coll_libnbc_iallreduce_algorithm set, or the variable not at its default),
// nor where the library has no such variable (another MPI). Both rules assume what MPI requires:
// every rank of the call in place, or none.
//
// The variable is the process's, and every caller of libnbc's iallreduce reads it: the
// application's own MPI_Iallreduce, and Open MPI itself, which agrees on a new communicator's id
// (MPI_Comm_split, MPI_Comm_dup) with it on the parent communicator. Those calls go wrong or hang
// unless every rank reads the same value, and ranks that ran different mcr calls last (a group's
// large all_reduce on some ranks only) would not. So mcr's value holds for its own call only:
// written just before MPI_Iallreduce, libnbc's own choice written back just after (mcr calls MPI
// from one thread at a time, MPI_THREAD_SERIALIZED; a write costs 16-27 ns).
#pragma once

#include <mpi.h>

#include <cstddef>

namespace mcr::detail {

/// libnbc's value for Rabenseifner's algorithm, and for "the library chooses".
inline constexpr int kLibnbcRabenseifner = 3;
inline constexpr int kLibnbcOwnChoice = 0;
/// From this many bytes an in-place nonblocking all_reduce asks for kLibnbcRabenseifner.
inline constexpr std::size_t kLibnbcBandwidthBytes = 64 * 1024;

/// The value mcr asks libnbc for before a nonblocking all_reduce of `bytes`, in place or not, on a
/// communicator of `ranks`.
constexpr int libnbc_iallreduce_algorithm_for(std::size_t bytes, bool in_place,
                                              int ranks) noexcept {
  const bool power_of_two = ranks >= 2 && (ranks & (ranks - 1)) == 0;
  return in_place && power_of_two && bytes >= kLibnbcBandwidthBytes ? kLibnbcRabenseifner
                                                                    : kLibnbcOwnChoice;
}

/// Decides once per process, alike on every rank of `world` (a collective over it), whether mcr
/// chooses the algorithm per call; later calls do nothing. Checked MPI calls (BackendError).
void setup_libnbc_iallreduce_choice(MPI_Comm world);
/// libnbc's algorithm for one MPI_Iallreduce of `bytes`, in place or not, on a communicator of
/// `ranks`, made between construction and restore(). Every rank of a communicator passes the same
/// three (MPI requires the place to agree), so all ask alike. Checked MPI calls
/// (BackendError); where restore() is not reached (the call raised) the destructor writes the
/// library's choice back unchecked.
class LibnbcIallreduceChoice {
 public:
  LibnbcIallreduceChoice(std::size_t bytes, bool in_place, int ranks);
  ~LibnbcIallreduceChoice();
  LibnbcIallreduceChoice(const LibnbcIallreduceChoice&) = delete;
  LibnbcIallreduceChoice& operator=(const LibnbcIallreduceChoice&) = delete;

  /// Gives libnbc its own choice back, for every other caller.
  void restore();

 private:
  bool written_ = false;
};

}  // namespace mcr::detail
