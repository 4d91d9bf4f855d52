#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <stdexcept>

#include "device_mirror.hpp"

namespace mcr::test {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(
        fmt::format("test device mirror: {}: {}", what, cudaGetErrorString(status)));
  }
}

void* upload(const Buffer& b) {
  void* p = nullptr;
  check(cudaMalloc(&p, b.storage_bytes()), "cudaMalloc");
  check(cudaMemcpy(p, b.data(), b.storage_bytes(), cudaMemcpyHostToDevice), "upload");
  return p;
}

}  // namespace

std::string no_device_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error so later CUDA calls are not affected
    return fmt::format("no CUDA device (cudaGetDeviceCount: {})", cudaGetErrorName(status));
  }
  return count == 0 ? "no CUDA device (cudaGetDeviceCount found 0)" : "";
}

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

DeviceMirror::DeviceMirror(PreparedCase& c, int index) : case_(c), index_(index) {
  check(cudaSetDevice(index), "cudaSetDevice");
  input_ = upload(c.buffer(Target::input));
  try {
    output_ = upload(c.buffer(Target::output));
  } catch (...) {
    (void)cudaFree(input_);
    throw;
  }
}

DeviceMirror::~DeviceMirror() {
  (void)cudaFree(input_);
  (void)cudaFree(output_);
}

void DeviceMirror::download() {
  // The device copy completes after the operation: the tests wait for it first.
  for (Target t : {Target::input, Target::output}) {
    Buffer& b = case_.buffer(t);
    check(cudaMemcpy(b.data(), t == Target::input ? input_ : output_, b.storage_bytes(),
                     cudaMemcpyDeviceToHost),
          "download");
  }
}

}  // namespace mcr::test
