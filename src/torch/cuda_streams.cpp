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

// A failed call as the runtime's other library errors read: the call, file:line, the op, the
// error's name and text (no rank: these helpers do not know the group).
#define MCR_TORCH_CUDA_CHECK(call, op)                                                             \
  do {                                                                                             \
    const cudaError_t mcr_status_ = (call);                                                        \
    TORCH_CHECK(mcr_status_ == cudaSuccess, #call, " failed at cuda_streams.cpp:", __LINE__, " (", \
                (op), "): ", cudaGetErrorName(mcr_status_), ": ",                                  \
                cudaGetErrorString(mcr_status_));                                                  \
  } while (false)

// The caller's current device again however the scope is left (a failed call in it threw and
// left the device it had set, which torch's later work on this thread would then run on).
class RestoreDevice {
 public:
  explicit RestoreDevice(const char* op) { MCR_TORCH_CUDA_CHECK(cudaGetDevice(&previous_), op); }
  ~RestoreDevice() {  // best effort: a destructor cannot throw; torch's next check must not
    if (cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();  // inherit the error
  }
  RestoreDevice(const RestoreDevice&) = delete;
  RestoreDevice& operator=(const RestoreDevice&) = delete;

 private:
  int previous_ = 0;
};

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
  const RestoreDevice restore(op);
  MCR_TORCH_CUDA_CHECK(cudaSetDevice(device), op);
  MCR_TORCH_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), op);
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
  const RestoreDevice restore(op);
  MCR_TORCH_CUDA_CHECK(cudaSetDevice(device), op);
  cudaEvent_t posted = nullptr;
  MCR_TORCH_CUDA_CHECK(cudaEventCreateWithFlags(&posted, cudaEventDisableTiming), op);
  // Released once the wait is done, and on a failure below too.
  struct DestroyEvent {
    cudaEvent_t event;
    ~DestroyEvent() {  // best effort, as RestoreDevice's
      if (cudaEventDestroy(event) != cudaSuccess) (void)cudaGetLastError();
    }
  } destroy{posted};
  MCR_TORCH_CUDA_CHECK(cudaEventRecord(posted, current.stream()), op);
  MCR_TORCH_CUDA_CHECK(cudaStreamWaitEvent(side, posted, 0), op);
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
  MCR_TORCH_CUDA_CHECK(cudaStreamSynchronize(raw), op);
}

}  // namespace mcr::torch_ext
