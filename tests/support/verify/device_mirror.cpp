#include "device_mirror.hpp"

namespace mcr::test {
namespace {

DeviceBuffer upload(const Buffer& b, int index) {
  DeviceBuffer d(Device::cuda(index), b.storage_bytes());
  d.copy_from_host(b.data(), b.storage_bytes());
  return d;
}

}  // namespace

std::string no_device_reason() {
  return device_count() > 0 ? "" : "no CUDA device (or this build has no CUDA support)";
}

int device_count() {
  return mcr::device_count(Device::Kind::cuda);
}

DeviceMirror::DeviceMirror(PreparedCase& c, int index)
    : case_(c),
      index_(index),
      input_(upload(c.buffer(Target::input), index)),
      output_(upload(c.buffer(Target::output), index)) {}

void DeviceMirror::download() {
  // copy_to_host waits for the work queued on the device, so the operation has completed.
  input_.copy_to_host(case_.buffer(Target::input).data(),
                      case_.buffer(Target::input).storage_bytes());
  output_.copy_to_host(case_.buffer(Target::output).data(),
                       case_.buffer(Target::output).storage_bytes());
}

}  // namespace mcr::test
