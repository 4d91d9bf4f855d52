// Device copies of a prepared case's buffers, for running conformance cases on device tensors.
// Built on the public mcr::DeviceBuffer: without CUDA (or a device) every device is reported
// absent and constructing a mirror throws, so tests need no #if and no device runtime header.
#pragma once

#include <string>

#include "mcr/comm/device_buffer.hpp"

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
  DeviceMirror(const DeviceMirror&) = delete;
  DeviceMirror& operator=(const DeviceMirror&) = delete;

  Placement placement() const { return {input_.data(), output_.data(), Device::cuda(index_)}; }
  void download();

 private:
  PreparedCase& case_;
  int index_ = 0;
  DeviceBuffer input_;
  DeviceBuffer output_;
};

}  // namespace mcr::test
