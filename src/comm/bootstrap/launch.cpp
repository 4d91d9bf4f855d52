// Launcher detection: which engine started this process and where the rank sits in the job.
#include <charconv>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "bootstrap/bootstrap.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

// An integer environment variable, or `fallback` if unset. Malformed values are an error, never a
// silent default: a wrong rank would form a wrong world.
int env_int(const char* name, int fallback, int min_value) {
  const char* v = env(name);
  if (v == nullptr) return fallback;
  int out = 0;
  std::string_view s(v);
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || ptr != s.data() + s.size() || out < min_value) {
    throw InvalidArgument(
        fmt::format("environment variable {}='{}' is not an integer >= {}", name, v, min_value));
  }
  return out;
}

}  // namespace

const char* to_string(Launcher l) noexcept {
  switch (l) {
    case Launcher::single:
      return "single";
    case Launcher::mpi:
      return "mpirun";
    case Launcher::slurm:
      return "srun";
    case Launcher::torchrun:
      return "torchrun";
  }
  return "?";
}

LaunchInfo detect_launch(bool store_given) {
  LaunchInfo info;
  if (env("OMPI_COMM_WORLD_SIZE") != nullptr) {  // Open MPI's mpirun/mpiexec
    info.launcher = Launcher::mpi;
    info.mpi_world = true;
    info.rank = env_int("OMPI_COMM_WORLD_RANK", 0, 0);
    info.size = env_int("OMPI_COMM_WORLD_SIZE", 1, 1);
    info.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, 0);
    info.local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1);
  } else if (env("SLURM_PROCID") != nullptr && env("SLURM_NTASKS") != nullptr &&
             env("RANK") == nullptr) {  // srun; MPI_Init forms the world through PMI/PMIx
    info.launcher = Launcher::slurm;
    info.mpi_world = env("PMIX_RANK") != nullptr || env("PMI_RANK") != nullptr ||
                     env("SLURM_MPI_TYPE") != nullptr;
    info.rank = env_int("SLURM_PROCID", 0, 0);
    info.size = env_int("SLURM_NTASKS", 1, 1);
    info.local_rank = env_int("SLURM_LOCALID", 0, 0);
    // SLURM_NTASKS_PER_NODE may be "2(x3)"; SLURM_TASKS_PER_NODE similar. The local size is only a
    // hint (for device binding), so fall back to the whole job when it is not a plain number.
    const char* per_node = env("SLURM_NTASKS_PER_NODE");
    int local = info.size;
    if (per_node != nullptr) {
      std::string_view s(per_node);
      int v = 0;
      auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (ec == std::errc() && ptr == s.data() + s.size() && v > 0) local = v;
    }
    info.local_size = local;
  } else if (env("RANK") != nullptr || env("WORLD_SIZE") != nullptr) {  // torchrun-style
    info.launcher = Launcher::torchrun;
    info.rank = env_int("RANK", 0, 0);
    info.size = env_int("WORLD_SIZE", 1, 1);
    info.local_rank = env_int("LOCAL_RANK", 0, 0);
    info.local_size = env_int("LOCAL_WORLD_SIZE", info.size, 1);
    const char* addr = env("MASTER_ADDR");
    // A store handed to init() replaces the one mcr would start at MASTER_ADDR:MASTER_PORT.
    const bool need_master = info.size > 1 && !store_given;
    if (need_master && addr == nullptr) {
      throw InvalidArgument(fmt::format(
          "RANK/WORLD_SIZE are set (WORLD_SIZE={}) but MASTER_ADDR is not: the rendezvous store "
          "needs MASTER_ADDR and MASTER_PORT",
          info.size));
    }
    info.master_addr = addr != nullptr ? addr : "127.0.0.1";
    info.master_port = env_int("MASTER_PORT", need_master ? -1 : 29500, 0);
    if (info.master_port < 0) {
      throw InvalidArgument("RANK/WORLD_SIZE are set but MASTER_PORT is not");
    }
    if (info.master_port > 65535) {
      throw InvalidArgument(
          fmt::format("MASTER_PORT={} is not a TCP port (0-65535)", info.master_port));
    }
  }
  if (info.rank >= info.size) {
    throw InvalidArgument(fmt::format("launcher environment ({}) gives rank {} >= world size {}",
                                      to_string(info.launcher), info.rank, info.size));
  }
  return info;
}

}  // namespace mcr::detail
