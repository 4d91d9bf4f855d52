// Device copies of a prepared case's buffers, for running conformance cases on device tensors.
// Built with CUDA this allocates device memory; without CUDA every device is reported absent (and
// constructing a mirror throws), so tests need no #if of their own.
#pragma once

#include <string>

#include "prepared_case.hpp"

namespace mcr::test {

/// Why device tests cannot run in this process; empty when a CUDA device is present.
std::string no_device_reason();
/// Number of CUDA devices (0 without CUDA).
int device_count();

/// Both buffers of a case copied to device `index` (guards included); download() copies them back
/// so that PreparedCase::verify() checks what the device holds.
class DeviceMirror {
 public:
  DeviceMirror(PreparedCase& c, int index);
  ~DeviceMirror();
  DeviceMirror(const DeviceMirror&) = delete;
  DeviceMirror& operator=(const DeviceMirror&) = delete;

  Placement placement() const { return {input_, output_, Device::cuda(index_)}; }
  void download();

 private:
  PreparedCase& case_;
  int index_ = 0;
  void* input_ = nullptr;
  void* output_ = nullptr;
};

}  // namespace mcr::test
