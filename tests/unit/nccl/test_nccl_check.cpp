// Host-side: the checked-call macros turn CUDA/NCCL failures into BackendError with full context.
// cudaGetErrorString and ncclGetErrorString work without a GPU, so the real macros are exercised.
#include <gtest/gtest.h>

#include "backends/nccl/nccl_check.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail::nccl {
namespace {

std::string message_of(void (*fn)()) {
  try {
    fn();
  } catch (const BackendError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no BackendError thrown";
  return {};
}

TEST(NcclCheck, FormatNamesCallPlaceRankOpAndLibraryText) {
  EXPECT_EQ(format_call_error("cudaMemcpyAsync(a, b)", "x.cpp", 12, {2, "broadcast"},
                              "cudaErrorInvalidValue", "invalid argument"),
            "cudaMemcpyAsync(a, b) failed at x.cpp:12 (rank 2, broadcast): "
            "cudaErrorInvalidValue: invalid argument");
  EXPECT_EQ(
      format_call_error("ncclSend(...)", "y.cpp", 7, {0, "all_to_all"}, "ncclSystemError",
                        "unhandled system error", "last NCCL error: peer 3 closed the connection"),
      "ncclSend(...) failed at y.cpp:7 (rank 0, all_to_all): ncclSystemError: unhandled "
      "system error; last NCCL error: peer 3 closed the connection");
  EXPECT_EQ(format_call_error("f()", "z.cpp", 1, {}, "E", "t"),
            "f() failed at z.cpp:1 (rank ?): E: t");
}

TEST(NcclCheck, CudaFailureBecomesBackendError) {
  const std::string msg = message_of([] {
    const CallSite site{3, "all_reduce"};
    MCR_CUDA_CHECK(site, cudaErrorInvalidValue);
  });
  EXPECT_NE(msg.find("cudaErrorInvalidValue failed at "), std::string::npos) << msg;
  EXPECT_NE(msg.find("test_nccl_check.cpp:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(rank 3, all_reduce)"), std::string::npos) << msg;
  EXPECT_NE(msg.find(cudaGetErrorString(cudaErrorInvalidValue)), std::string::npos) << msg;
}

TEST(NcclCheck, NcclFailureBecomesBackendErrorWithTheLibraryText) {
  const std::string msg = message_of([] {
    const CallSite site{1, "gather"};
    MCR_NCCL_CHECK(site, nullptr, ncclInvalidArgument);
  });
  EXPECT_NE(msg.find("ncclInvalidArgument failed at "), std::string::npos) << msg;
  EXPECT_NE(msg.find("(rank 1, gather): ncclInvalidArgument: "), std::string::npos) << msg;
  EXPECT_NE(msg.find(ncclGetErrorString(ncclInvalidArgument)), std::string::npos) << msg;
}

TEST(NcclCheck, SuccessDoesNotThrowAndEvaluatesOnce) {
  int calls = 0;
  const auto ok = [&] {
    ++calls;
    return cudaSuccess;
  };
  const CallSite site{0, "x"};
  MCR_CUDA_CHECK(site, ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(nccl_result_name(ncclRemoteError), "ncclRemoteError");
}

}  // namespace
}  // namespace mcr::detail::nccl
