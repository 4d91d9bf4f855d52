// Built without CUDA: no device, and no mirror can be made.
#include <stdexcept>

#include "device_mirror.hpp"

namespace mcr::test {

std::string no_device_reason() {
  return "built without CUDA";
}

int device_count() {
  return 0;
}

DeviceMirror::DeviceMirror(PreparedCase& c, int index) : case_(c), index_(index) {
  throw std::logic_error("test bug: a device mirror in a build without CUDA");
}

DeviceMirror::~DeviceMirror() = default;

void DeviceMirror::download() {}

}  // namespace mcr::test
