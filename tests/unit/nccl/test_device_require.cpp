// Host-side: asking for a CUDA device where the runtime finds none says the runtime's reason (a
// driver older than the runtime read as "no device", and sent the user to CUDA_VISIBLE_DEVICES).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <string>

#include "device/device_runtime.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail::device {
namespace {

TEST(DeviceRequire, SaysTheRuntimesReasonWhereThereIsNoDevice) {
  int n = 0;
  const cudaError_t status = cudaGetDeviceCount(&n);
  (void)cudaGetLastError();
  if (status == cudaSuccess && n > 0) {
    EXPECT_NO_THROW(require(Device::cuda(0)));
    EXPECT_THROW(require(Device::cuda(n)), InvalidArgument);
    return;
  }
  try {
    require(Device::cuda(0));
    ADD_FAILURE() << "a CUDA device was accepted where the runtime finds none";
  } catch (const UnsupportedError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("device cuda: no CUDA device is visible to this process"),
              std::string::npos)
        << what;
    if (status != cudaSuccess) {
      EXPECT_NE(what.find(std::string("cudaGetDeviceCount: ") + cudaGetErrorName(status)),
                std::string::npos)
          << what;
    }
  }
}

}  // namespace
}  // namespace mcr::detail::device
