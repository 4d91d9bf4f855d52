// CUDA tensors: each operation is ordered after the work the caller's current stream had queued
// when it was posted, through an event and a stream of the binding's own per device (as torch-ucc
// does), because the communication thread issues it later, when that stream may hold more.
#include <array>
#include <mutex>

#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime.h>

#include "device_order.hpp"

namespace mcr::torch_ext {
namespace {

void check(cudaError_t status, const char* call, const char* op) {
  TORCH_CHECK(status == cudaSuccess, "mcr ", op, ": ", call, " failed: ", cudaGetErrorName(status),
              ": ", cudaGetErrorString(status));
}

// One ordering stream per device, made on first use and kept for the process's life (a stream
// destroyed at exit could still be referenced by queued work).
struct Ordering {
  std::mutex mu;
  std::array<cudaStream_t, 64> streams{};
};

Ordering& ordering() {
  static auto& o = *new Ordering;
  return o;
}

}  // namespace

bool cuda_tensors_supported() noexcept {
  return true;
}

void* order_after_current_stream(const at::Tensor& t, const char* op) {
  if (!t.device().is_cuda()) return nullptr;
  const int device = t.get_device();
  TORCH_CHECK(device >= 0 && device < 64, "mcr ", op, ": CUDA device index ", device,
              " is outside [0, 64)");
  const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device);
  auto& o = ordering();
  std::lock_guard lock(o.mu);
  cudaStream_t& side = o.streams[static_cast<std::size_t>(device)];
  int previous = -1;
  check(cudaGetDevice(&previous), "cudaGetDevice", op);
  check(cudaSetDevice(device), "cudaSetDevice", op);
  if (side == nullptr)
    check(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), "cudaStreamCreate", op);
  cudaEvent_t posted = nullptr;
  check(cudaEventCreateWithFlags(&posted, cudaEventDisableTiming), "cudaEventCreate", op);
  check(cudaEventRecord(posted, current.stream()), "cudaEventRecord", op);
  check(cudaStreamWaitEvent(side, posted, 0), "cudaStreamWaitEvent", op);
  check(cudaEventDestroy(posted), "cudaEventDestroy", op);  // released once the wait is done
  check(cudaSetDevice(previous), "cudaSetDevice", op);
  return side;
}

}  // namespace mcr::torch_ext
