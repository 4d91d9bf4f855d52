// Which launcher started this process and where it placed the rank: the one reader of the
// launchers' environment (Open MPI's mpirun, Slurm's srun, torchrun), used by init(), the
// benchmarks and the Python package alike, so that they cannot disagree.
#pragma once

#include <string>

namespace mcr {

enum class Launcher { single, mpi, slurm, torchrun };
/// "single", "mpirun", "srun", "torchrun".
const char* to_string(Launcher l) noexcept;

struct LaunchInfo {
  Launcher launcher = Launcher::single;
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  /// Where rank 0 runs mcr's store when no MPI launcher forms the world: torchrun's MASTER_ADDR
  /// and MASTER_PORT; under srun without PMI the same variables when set, else derived from the
  /// step (the step's first node, its first reserved port or one derived from the job and step
  /// ids). Empty under mpirun and srun with PMI.
  std::string master_addr;
  int master_port = 0;
  /// Whether an MPI launcher (mpirun/mpiexec, or srun with PMI) set this job up, so that MPI_Init
  /// forms the real world. Under torchrun-style variables alone it is false, and the MPI backend
  /// reports itself unusable rather than forming a world of one.
  bool mpi_world = false;
};

/// Reads the launcher's environment, first match wins: OMPI_COMM_WORLD_* (mpirun); SLURM_PROCID
/// and SLURM_NTASKS without RANK (srun; PMIX_RANK, PMI_RANK or SLURM_MPI_TYPE other than "none"
/// say it has PMI); RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE/MASTER_ADDR/MASTER_PORT
/// (torchrun, or by hand); else a single process. Throws InvalidArgument naming the variable, its
/// value and the rule when one is malformed, or when a world of several ranks has no rendezvous
/// address. `store_given`: the caller brings its own store (InitOptions::store, torch's), so
/// torchrun's MASTER_ADDR/MASTER_PORT are not required.
LaunchInfo launch_info(bool store_given = false);

}  // namespace mcr
