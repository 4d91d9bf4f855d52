// A build of the binding without CUDA: CPU tensors only.
#include <c10/util/Exception.h>

#include "device_order.hpp"

namespace mcr::torch_ext {

bool cuda_tensors_supported() noexcept {
  return false;
}

void* order_after_current_stream(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.device().is_cpu(), "mcr ", op, ": ", t.device(),
              " tensors need a build of mcr with CUDA (MCR_WITH_CUDA) against a CUDA build of "
              "torch; this one handles CPU tensors only");
  return nullptr;
}

void run_copy_back(const at::Tensor&, const std::function<void()>& copy_back) {
  copy_back();
}

}  // namespace mcr::torch_ext
