// Launcher detection (mcr/comm/launch.hpp): which engine started this process and where the rank
// sits in the job.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "bootstrap/bootstrap.hpp"
#include "mcr/comm/launch.hpp"
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

// A Slurm id (job or step: 32-bit unsigned), or `fallback` if unset; malformed values are an error.
std::int64_t env_slurm_id(const char* name, std::int64_t fallback) {
  const char* v = env(name);
  if (v == nullptr) return fallback;
  std::uint32_t out = 0;
  std::string_view s(v);
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || ptr != s.data() + s.size()) {
    throw InvalidArgument(
        fmt::format("environment variable {}='{}' is not a Slurm id (0 to 4294967295)", name, v));
  }
  return out;
}

// The step id of this process, or -1 outside a step.
std::int64_t slurm_step_id() {
  return env_slurm_id("SLURM_STEP_ID", env_slurm_id("SLURM_STEPID", -1));
}

// Whether this process runs in a step srun started. Slurm's own steps have ids from 0xfffffff0 up
// (the batch script's, an salloc shell's interactive step 0xfffffffa, the extern step): a process
// there was not started by srun as a task of a step.
bool in_srun_step() {
  const std::int64_t step = slurm_step_id();
  return step >= 0 && step < 0xfffffff0;
}

// Tasks on this node of the step: SLURM_STEP_TASKS_PER_NODE (srun's), else the job's
// SLURM_TASKS_PER_NODE, else SLURM_NTASKS_PER_NODE (set only by --ntasks-per-node), at the index
// SLURM_NODEID. Only a hint (device binding, topology guesses), so a form this code does not know
// falls back to the whole job rather than failing.
int slurm_local_size(int size) {
  const int node = env_int("SLURM_NODEID", 0, 0);
  for (const char* name :
       {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE"}) {
    if (const char* v = env(name)) {
      const int n = slurm_tasks_on_node(v, node);
      return n > 0 ? n : size;
    }
  }
  return size;
}

struct SlurmMaster {
  std::string addr;
  int port = 0;
};

// Where rank 0 of an srun step without PMI runs mcr's store. Every task must arrive at the same
// answer from its own environment: MASTER_ADDR/MASTER_PORT when the user set them; else loopback
// when the step has one node, and otherwise the first node of the step (srun places task 0 there
// under its block and cyclic distributions); the first port srun reserved for the step
// (--resv-ports), else one derived from the job and step ids.
SlurmMaster slurm_master() {
  SlurmMaster m;
  if (const char* addr = env("MASTER_ADDR")) {
    m.addr = addr;
  } else if (env_int("SLURM_STEP_NUM_NODES", env_int("SLURM_NNODES", 0, 1), 1) == 1) {
    m.addr = "127.0.0.1";
  } else {
    const char* name = env("SLURM_STEP_NODELIST") != nullptr  ? "SLURM_STEP_NODELIST"
                       : env("SLURM_JOB_NODELIST") != nullptr ? "SLURM_JOB_NODELIST"
                                                              : "SLURM_NODELIST";
    const char* list = env(name);
    m.addr = list != nullptr ? slurm_first_host(list) : std::string();
    if (m.addr.empty()) {
      throw InvalidArgument(fmt::format(
          "srun without PMI: cannot tell rank 0's node from {}='{}'; set MASTER_ADDR to it", name,
          list != nullptr ? list : ""));
    }
  }
  // The variable the port came from, for the range check below.
  std::string from = "MASTER_PORT";
  if (env("MASTER_PORT") != nullptr) {
    m.port = env_int("MASTER_PORT", 0, 1);
  } else if (const char* resv = env("SLURM_STEP_RESV_PORTS")) {
    from = fmt::format("SLURM_STEP_RESV_PORTS='{}'", resv);
    // "12000-12003" or "12000": the step's own ports, which no other step is given.
    std::string_view s(resv);
    s = s.substr(0, s.find_first_of("-,"));
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), m.port);
    if (ec != std::errc() || ptr != s.data() + s.size() || m.port < 1) {
      throw InvalidArgument(fmt::format(
          "environment variable SLURM_STEP_RESV_PORTS='{}' is not a port range such as 12000-12003",
          resv));
    }
  } else {
    const std::int64_t job = env_slurm_id("SLURM_JOB_ID", env_slurm_id("SLURM_JOBID", -1));
    const std::int64_t step = std::max<std::int64_t>(slurm_step_id(), 0);
    if (job < 0) {
      throw InvalidArgument(
          "srun without PMI: SLURM_JOB_ID is not set, so no store port can be derived; set "
          "MASTER_PORT");
    }
    m.port = slurm_default_port(job, step);
  }
  if (m.port > 65535) {
    throw InvalidArgument(fmt::format("{}: port {} is not a TCP port (1-65535)", from, m.port));
  }
  return m;
}

}  // namespace

int slurm_tasks_on_node(std::string_view per_node, int node) {
  // Comma-separated groups "COUNT" or "COUNT(xREPEAT)", in node order.
  int first_node = 0;
  while (!per_node.empty()) {
    const auto comma = per_node.find(',');
    std::string_view group = per_node.substr(0, comma);
    per_node = comma == std::string_view::npos ? std::string_view() : per_node.substr(comma + 1);
    int count = 0, repeat = 1;
    auto [ptr, ec] = std::from_chars(group.data(), group.data() + group.size(), count);
    if (ec != std::errc() || count < 1) return -1;
    std::string_view rest(ptr, static_cast<std::size_t>(group.data() + group.size() - ptr));
    if (!rest.empty()) {
      if (!rest.starts_with("(x") || !rest.ends_with(")")) return -1;
      rest = rest.substr(2, rest.size() - 3);
      auto [p2, e2] = std::from_chars(rest.data(), rest.data() + rest.size(), repeat);
      if (e2 != std::errc() || p2 != rest.data() + rest.size() || repeat < 1) return -1;
    }
    if (node < first_node + repeat) return count;
    first_node += repeat;
  }
  return -1;
}

std::string slurm_first_host(std::string_view list) {
  // "a[01-04,07]b[1-2],c" -> "a01b1": up to the first comma outside brackets, each bracketed
  // range replaced by its first value (zero padding is part of the value).
  std::string host;
  std::size_t i = 0;
  while (i < list.size() && list[i] != ',') {
    if (list[i] == ']') return {};
    if (list[i] != '[') {
      host += list[i++];
      continue;
    }
    const auto close = list.find(']', i);
    if (close == std::string_view::npos) return {};
    const std::string_view range = list.substr(i + 1, close - i - 1);
    const std::string_view first = range.substr(0, range.find_first_of(",-"));
    if (first.empty()) return {};
    host += first;
    i = close + 1;
  }
  return host;
}

int slurm_default_port(std::int64_t job_id, std::int64_t step_id) {
  // 10000-29999: below Linux's ephemeral range (32768-60999), where srun's and slurmstepd's own
  // sockets are; consecutive jobs and the first ten steps of a job get distinct ports.
  return static_cast<int>(10000 + (job_id % 2000) * 10 + step_id % 10);
}

}  // namespace mcr::detail

namespace mcr {

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

namespace {

// MPICH's or Intel MPI's mpiexec (Hydra): its world is in PMI_RANK/PMI_SIZE, which mcr does not
// form. `misread`: what reading the process otherwise would make of it.
InvalidArgument hydra_launch(int pmi_size, std::string_view misread) {
  const char* rank = detail::env("PMI_RANK");
  return InvalidArgument(fmt::format(
      "launch: PMI_SIZE={} (PMI_RANK={}): started by an MPI launcher whose world mcr does not "
      "form (MPICH's or Intel MPI's mpiexec); {}. Launch with Open MPI's mpirun, srun or "
      "torchrun, or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT",
      pmi_size, rank != nullptr ? rank : "(unset)", misread));
}

}  // namespace

LaunchInfo launch_info(bool store_given) {
  using detail::env;
  using detail::env_int;
  LaunchInfo info;
  if (env("OMPI_COMM_WORLD_SIZE") != nullptr) {  // Open MPI's mpirun/mpiexec
    info.launcher = Launcher::mpi;
    info.mpi_world = true;
    info.rank = env_int("OMPI_COMM_WORLD_RANK", 0, 0);
    info.size = env_int("OMPI_COMM_WORLD_SIZE", 1, 1);
    info.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, 0);
    info.local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1);
    // torchrun started under mpirun (`mpirun -np 2 torchrun --nproc-per-node 4`) leaves each
    // worker with its parent's MPI rank: four workers would claim one rank of a world of 2.
    // mcr.torch.init_processes() sets RANK and WORLD_SIZE from mpirun's, which then agree.
    const int rank = env_int("RANK", info.rank, 0);
    const int size = env_int("WORLD_SIZE", info.size, 1);
    if (rank != info.rank || size != info.size) {
      throw InvalidArgument(fmt::format(
          "launch: mpirun says rank {} of {} (OMPI_COMM_WORLD_RANK/SIZE) but RANK={} and "
          "WORLD_SIZE={} say rank {} of {}: a launcher (torchrun?) started under mpirun; start "
          "the processes with one launcher",
          info.rank, info.size, env("RANK") ? env("RANK") : "(unset)",
          env("WORLD_SIZE") ? env("WORLD_SIZE") : "(unset)", rank, size));
    }
  } else if (env("SLURM_PROCID") != nullptr && env("SLURM_NTASKS") != nullptr &&
             detail::in_srun_step() && env("RANK") == nullptr) {  // srun
    // A task of a step. An sbatch script (the batch step) or an salloc shell has SLURM_PROCID=0
    // and the job's SLURM_NTASKS too, but no step id, or one of Slurm's own (an interactive
    // step's): a process started there without srun is alone, not rank 0 of a world whose other
    // ranks never come.
    info.launcher = Launcher::slurm;
    // With an MPI plugin (srun --mpi=pmix or pmi2) MPI_Init forms the world through PMI/PMIx.
    // Without one (MpiDefault=none, srun --mpi=none) srun still exports SLURM_MPI_TYPE=none on
    // some installations, which says nothing of the kind.
    const char* mpi_type = env("SLURM_MPI_TYPE");
    info.mpi_world = env("PMIX_RANK") != nullptr || env("PMI_RANK") != nullptr ||
                     (mpi_type != nullptr && std::string_view(mpi_type) != "none");
    info.rank = env_int("SLURM_PROCID", 0, 0);
    // The step's tasks: SLURM_NTASKS is the job's where srun passes the job's environment on
    // (--preserve-env), and a step of 2 in a job of 8 then waited for 6 ranks that never came.
    info.size = env_int("SLURM_STEP_NUM_TASKS", env_int("SLURM_NTASKS", 1, 1), 1);
    info.local_rank = env_int("SLURM_LOCALID", 0, 0);
    // Hydra inside an allocation starts one proxy a node with srun: its ranks inherit the proxy's
    // step (SLURM_PROCID: the node) and say their own place in PMI_RANK/PMI_SIZE. Read as the
    // step's, every rank of a node was its local rank 0, and MPI's world disagreed with it later.
    // srun's own PMI (--mpi=pmi2) sets them to the step's.
    if (env("PMI_SIZE") != nullptr &&
        (env_int("PMI_SIZE", 1, 1) != info.size || env_int("PMI_RANK", 0, 0) != info.rank)) {
      throw hydra_launch(
          env_int("PMI_SIZE", 1, 1),
          fmt::format("read as the srun step its launcher's proxy runs in (task {} of {}), every "
                      "process of a node would take that one task's place",
                      info.rank, info.size));
    }
    info.local_size = detail::slurm_local_size(info.size);
    if (!info.mpi_world) {
      // mcr's own store forms the world: rank 0 listens where every task can find it without
      // talking to the others first (store_setup.cpp).
      const detail::SlurmMaster m = detail::slurm_master();
      info.master_addr = m.addr;
      info.master_port = m.port;
    }
  } else if (env("RANK") != nullptr || env("WORLD_SIZE") != nullptr) {  // torchrun-style
    info.launcher = Launcher::torchrun;
    info.rank = env_int("RANK", 0, 0);
    info.size = env_int("WORLD_SIZE", 1, 1);
    // Without RANK every process of the world would take rank 0: one would start the store, the
    // others fail to, and the real peers would wait out the timeout. (With a store handed to
    // init(), InitOptions gives the rank.)
    if (info.size > 1 && env("RANK") == nullptr && !store_given) {
      throw InvalidArgument(fmt::format(
          "WORLD_SIZE={} is set but RANK is not: every process would be rank 0; set RANK (0 to {}) "
          "in each process, as torchrun does",
          info.size, info.size - 1));
    }
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
    // Port 0 lets rank 0's store take any free port, which the other ranks cannot know.
    if (need_master && info.master_port == 0) {
      throw InvalidArgument(fmt::format(
          "MASTER_PORT=0 with WORLD_SIZE={}: rank 0's store would listen on a port of the "
          "system's choosing, which the other ranks cannot know; choose a fixed free port "
          "(1-65535)",
          info.size));
    }
  } else if (const int pmi_size = env_int("PMI_SIZE", 1, 1); pmi_size > 1) {
    // MPICH's or Intel MPI's mpiexec (Hydra) says the world in PMI_RANK/PMI_SIZE, which mcr does
    // not read: read as a process alone, each would have formed a world of its own and trained
    // alone, without a word.
    throw hydra_launch(pmi_size, "each process would be a world of one");
  }
  if (info.rank >= info.size) {
    throw InvalidArgument(fmt::format("launcher environment ({}) gives rank {} >= world size {}",
                                      to_string(info.launcher), info.rank, info.size));
  }
  return info;
}

}  // namespace mcr
