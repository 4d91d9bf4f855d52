// The one form of a failed library call's message (docs/errors.md, BackendError), as the MPI,
// Gloo, NCCL and CUDA checked calls build it.
#include <gtest/gtest.h>

#include "core/library_error.hpp"

namespace mcr::detail {
namespace {

TEST(LibraryError, NamesCallPlaceRankOpAndTheLibrarysText) {
  // MPI: no operation at the call site; the code is the name.
  EXPECT_EQ(format_call_error("MPI_Allreduce(...)", "/src/comm/backends/mpi/mpi_ops.cpp", 88,
                              {3, {}}, "MPI error 15", "MPI_ERR_TRUNCATE: message truncated"),
            "MPI_Allreduce(...) failed at mpi_ops.cpp:88 (rank 3): MPI error 15: "
            "MPI_ERR_TRUNCATE: message truncated");
  // Gloo: the operation with its sequence number, and what mcr adds about a lost peer.
  EXPECT_EQ(format_call_error("gloo: allreduce", "gloo_ops.cpp", 5, {1, "all_reduce #7"},
                              "gloo::IoException", "Connection closed by peer",
                              "world rank 2 closed its connection"),
            "gloo: allreduce failed at gloo_ops.cpp:5 (rank 1, all_reduce #7): "
            "gloo::IoException: Connection closed by peer; world rank 2 closed its connection");
  // Unknown rank.
  EXPECT_EQ(format_call_error("f()", "z.cpp", 1, {}, "E", "t"),
            "f() failed at z.cpp:1 (rank ?): E: t");
}

}  // namespace
}  // namespace mcr::detail
