// The backends compiled into this build: the one place that reads the build configuration's backend
// switches, so that no other shared code needs a backend #if.
#include "mcr_build_config.hpp"

#include <cstdlib>

#include "backends/factories.hpp"
#include "bootstrap/bootstrap.hpp"

namespace mcr::detail {

const std::vector<BackendFactory>& compiled_backends() {
  static const std::vector<BackendFactory> list = [] {
    std::vector<BackendFactory> v;
    // Default priority: the device-native library first, then MPI, then Gloo.
#if MCR_HAVE_CUDA
    v.push_back(nccl_backend_factory());
#endif
#if MCR_HAVE_MPI
    v.push_back(mpi_backend_factory());
#endif
#if MCR_HAVE_GLOO
    v.push_back(gloo_backend_factory());
#endif
    return v;
  }();
  return list;
}

#if !MCR_HAVE_CUDA
std::unique_ptr<Backend> with_device_staging(std::unique_ptr<Backend> backend) { return backend; }
std::unique_ptr<Backend> with_device_staging_if_device(std::unique_ptr<Backend> backend) { return backend; }
#endif

#if !MCR_HAVE_MPI
std::unique_ptr<Exchange> mpi_world_exchange(const LaunchInfo&) { return nullptr; }
void mpi_shutdown() noexcept {}
[[noreturn]] void abort_job(int code) noexcept { std::_Exit(code); }
#endif

}  // namespace mcr::detail
