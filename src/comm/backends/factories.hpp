// Factories of the backends compiled into this build. Each is defined in its backend's folder; the
// registry (registry.cpp) lists those the build configuration enabled.
#pragma once

#include "backend.hpp"

namespace mcr::detail {

BackendFactory mpi_backend_factory();
BackendFactory gloo_backend_factory();
BackendFactory nccl_backend_factory();

}  // namespace mcr::detail

namespace mcr::detail {

/// Wraps a host-only backend so that it also accepts CUDA tensors by staging them through pinned host
/// buffers (defined by the CUDA build; without CUDA the registry returns the backend unchanged).
/// Operations the inner backend runs natively on device memory (CUDA-aware MPI) pass through.
std::unique_ptr<Backend> with_device_staging(std::unique_ptr<Backend> backend);
/// As with_device_staging when this process sees a CUDA device; otherwise the backend unchanged.
std::unique_ptr<Backend> with_device_staging_if_device(std::unique_ptr<Backend> backend);

}  // namespace mcr::detail

namespace mcr::detail {

class Exchange;
struct LaunchInfo;

/// MPI launch support, defined by the MPI backend. When the launcher set up an MPI world, initialises
/// MPI and returns a world exchange over MPI; otherwise (or without MPI in the build) nullptr.
std::unique_ptr<Exchange> mpi_world_exchange(const LaunchInfo& launch);
/// Finalizes MPI if mpi_world_exchange() initialised it.
void mpi_shutdown() noexcept;
/// Ends the whole job after an unrecoverable error (MPI_Abort when MPI is up, else std::abort).
[[noreturn]] void abort_job(int code) noexcept;

}  // namespace mcr::detail
