// The registration point: the backends compiled into this build, flat ones in default priority
// order and then the composed ones, from the list CMake generates (mcr_backend_list.inc), and the
// launch hooks they offer.
#include <cstdlib>

#include "backends/factories.hpp"
#include "bootstrap/bootstrap.hpp"
#include "mcr/comm/info.hpp"
#include "runtime/launch_hooks.hpp"

namespace mcr::detail {

const std::vector<BackendFactory>& compiled_backends() {
  static const std::vector<BackendFactory> list{
#define MCR_BACKEND(name) name##_backend_factory(),
#include "mcr_backend_list.inc"
#undef MCR_BACKEND
  };
  return list;
}

const std::vector<ComposedBackendFactory>& composed_backends() {
  static const std::vector<ComposedBackendFactory> list{
#define MCR_COMPOSED_BACKEND(name) name##_composed_factory(),
#include "mcr_backend_list.inc"
#undef MCR_COMPOSED_BACKEND
  };
  return list;
}

std::vector<std::string> compiled_backend_names() {
  std::vector<std::string> out;
  for (const auto& f : compiled_backends())
    out.emplace_back(f.name);
  for (const auto& f : composed_backends())
    out.emplace_back(f.name);
  return out;
}

std::unique_ptr<Exchange> launcher_world_exchange(const LaunchInfo& launch) {
  for (const auto& f : compiled_backends()) {
    if (f.launch_support == nullptr) continue;
    if (auto exchange = f.launch_support()->world_exchange(launch)) return exchange;
  }
  return nullptr;
}

void shutdown_launchers() noexcept {
  for (const auto& f : compiled_backends()) {
    if (f.launch_support != nullptr) f.launch_support()->shutdown();
  }
}

bool launchers_may_shut_down_after_failure() noexcept {
  for (const auto& f : compiled_backends()) {
    if (f.launch_support != nullptr && !f.launch_support()->may_shut_down_after_failure()) {
      return false;
    }
  }
  return true;
}

bool launchers_accept_any_thread() noexcept {
  for (const auto& f : compiled_backends()) {
    if (f.launch_support != nullptr && !f.launch_support()->any_thread_may_call()) return false;
  }
  return true;
}

[[noreturn]] void abort_job(int code) noexcept {
  for (const auto& f : compiled_backends()) {
    if (f.launch_support != nullptr) f.launch_support()->abort_job(code);
  }
  std::_Exit(code);
}

}  // namespace mcr::detail

namespace mcr {

const std::vector<std::string>& backend_names() {
  static const std::vector<std::string> names{
#define MCR_KNOWN_BACKEND(name) #name,
#include "mcr_backend_list.inc"
#undef MCR_KNOWN_BACKEND
  };
  return names;
}

}  // namespace mcr
