// CUDA tensors: each operation is ordered after the work the caller's current stream had queued
// when it was posted, through an event and a stream of the binding's own per device (as torch-ucc
// does), because the communication thread issues it later, when that stream may hold more.
#include <array>
#include <functional>
#include <mutex>

#include <c10/cuda/CUDAGuard.h>
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

// The copy-back streams, one per device, likewise kept: they hold only copy-backs, so waiting for
// one waits for nothing of the caller's.
Ordering& copy_back_streams() {
  static auto& o = *new Ordering;
  return o;
}

cudaStream_t stream_of(Ordering& o, int device, const char* op) {
  std::lock_guard lock(o.mu);
  cudaStream_t& s = o.streams[static_cast<std::size_t>(device)];
  if (s != nullptr) return s;
  int previous = -1;
  check(cudaGetDevice(&previous), "cudaGetDevice", op);
  check(cudaSetDevice(device), "cudaSetDevice", op);
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate", op);
  check(cudaSetDevice(previous), "cudaSetDevice", op);
  return s;
}

int checked_device(const at::Tensor& t, const char* op) {
  const int device = t.get_device();
  TORCH_CHECK(device >= 0 && device < 64, "mcr ", op, ": CUDA device index ", device,
              " is outside [0, 64)");
  return device;
}

}  // namespace

bool cuda_tensors_supported() noexcept {
  return true;
}

void* order_after_current_stream(const at::Tensor& t, const char* op) {
  if (!t.device().is_cuda()) return nullptr;
  const int device = checked_device(t, op);
  const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device);
  cudaStream_t side = stream_of(ordering(), device, op);
  int previous = -1;
  check(cudaGetDevice(&previous), "cudaGetDevice", op);
  check(cudaSetDevice(device), "cudaSetDevice", op);
  cudaEvent_t posted = nullptr;
  check(cudaEventCreateWithFlags(&posted, cudaEventDisableTiming), "cudaEventCreate", op);
  check(cudaEventRecord(posted, current.stream()), "cudaEventRecord", op);
  check(cudaStreamWaitEvent(side, posted, 0), "cudaStreamWaitEvent", op);
  check(cudaEventDestroy(posted), "cudaEventDestroy", op);  // released once the wait is done
  check(cudaSetDevice(previous), "cudaSetDevice", op);
  return side;
}

void run_copy_back(const at::Tensor& t, const std::function<void()>& copy_back) {
  if (!t.defined() || !t.device().is_cuda()) {
    copy_back();
    return;
  }
  const char* op = "copy-back";
  const int device = checked_device(t, op);
  const cudaStream_t raw = stream_of(copy_back_streams(), device, op);
  {
    // ATen's copies and kernels go to the current stream: this thread's is otherwise the device's
    // default stream, which the caller's side streams do not wait for.
    const c10::cuda::CUDAStreamGuard on_it(
        c10::cuda::getStreamFromExternal(raw, static_cast<c10::DeviceIndex>(device)));
    copy_back();
  }
  check(cudaStreamSynchronize(raw), "cudaStreamSynchronize", op);
}

}  // namespace mcr::torch_ext
