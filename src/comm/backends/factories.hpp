// Factories of the backends compiled into this build, one per backend folder. The list is generated
// by CMake from the folders src/comm/CMakeLists.txt registers, so adding a backend means adding its
// folder and one line there.
#pragma once

#include "core/backend.hpp"

namespace mcr::detail {

#define MCR_BACKEND(name) BackendFactory name##_backend_factory();
#define MCR_COMPOSED_BACKEND(name) ComposedBackendFactory name##_composed_factory();
#include "mcr_backend_list.inc"
#undef MCR_COMPOSED_BACKEND
#undef MCR_BACKEND

}  // namespace mcr::detail
