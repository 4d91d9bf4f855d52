#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>

#include "bootstrap/bootstrap.hpp"
#include "mcr/comm/launch.hpp"
#include "mcr/errors.hpp"

using namespace mcr::detail;

namespace {
// Clears every launcher variable for the duration of a test, then sets `vars` (name, value).
struct CleanEnv {
  explicit CleanEnv(std::initializer_list<std::pair<const char*, const char*>> vars = {}) {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE",
                          "OMPI_COMM_WORLD_RANK",
                          "OMPI_COMM_WORLD_LOCAL_RANK",
                          "OMPI_COMM_WORLD_LOCAL_SIZE",
                          "SLURM_PROCID",
                          "SLURM_NTASKS",
                          "SLURM_LOCALID",
                          "SLURM_NTASKS_PER_NODE",
                          "PMIX_RANK",
                          "RANK",
                          "WORLD_SIZE",
                          "LOCAL_RANK",
                          "LOCAL_WORLD_SIZE",
                          "MASTER_ADDR",
                          "MASTER_PORT",
                          "PMI_RANK",
                          "PMI_SIZE",
                          "SLURM_MPI_TYPE",
                          "SLURM_NODEID",
                          "SLURM_STEP_TASKS_PER_NODE",
                          "SLURM_TASKS_PER_NODE",
                          "SLURM_STEP_NUM_NODES",
                          "SLURM_NNODES",
                          "SLURM_STEP_NODELIST",
                          "SLURM_JOB_NODELIST",
                          "SLURM_NODELIST",
                          "SLURM_STEP_RESV_PORTS",
                          "SLURM_JOB_ID",
                          "SLURM_JOBID",
                          "SLURM_STEP_ID",
                          "SLURM_STEPID",
                          "SLURM_STEP_NUM_TASKS"}) {
      unsetenv(v);
    }
    for (const auto& [name, value] : vars)
      setenv(name, value, 1);
  }
};
}  // namespace

TEST(Launch, SingleProcess) {
  CleanEnv clean;
  auto l = mcr::launch_info();
  EXPECT_EQ(l.launcher, Launcher::single);
  EXPECT_EQ(l.size, 1);
}

TEST(Launch, OpenMpi) {
  CleanEnv clean({{"OMPI_COMM_WORLD_SIZE", "4"},
                  {"OMPI_COMM_WORLD_RANK", "3"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  auto l = mcr::launch_info();
  EXPECT_EQ(l.launcher, Launcher::mpi);
  EXPECT_TRUE(l.mpi_world);
  EXPECT_EQ(l.rank, 3);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.local_size, 2);
}

TEST(Launch, SlurmWithPmix) {
  CleanEnv clean({{"SLURM_PROCID", "5"},
                  {"SLURM_NTASKS", "8"},
                  {"SLURM_LOCALID", "1"},
                  {"SLURM_NTASKS_PER_NODE", "4"},
                  {"PMIX_RANK", "5"},
                  {"SLURM_STEP_ID", "0"}});
  auto l = mcr::launch_info();
  EXPECT_EQ(l.launcher, Launcher::slurm);
  EXPECT_TRUE(l.mpi_world);
  EXPECT_EQ(l.rank, 5);
  EXPECT_EQ(l.local_size, 4);
}

// MPICH's or Intel MPI's mpiexec (Hydra): PMI_RANK/PMI_SIZE, which mcr does not read. Read as a
// process alone, each of the job's processes formed a world of one.
TEST(Launch, AnMpiLauncherItDoesNotReadIsRefused) {
  CleanEnv clean({{"PMI_RANK", "1"}, {"PMI_SIZE", "4"}});
  try {
    mcr::launch_info();
    FAIL() << "PMI_SIZE=4 read as a process alone";
  } catch (const mcr::InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("PMI_SIZE=4 (PMI_RANK=1)"), std::string::npos) << what;
    EXPECT_NE(what.find("world of one"), std::string::npos) << what;
  }
  setenv("PMI_SIZE", "1", 1);  // a singleton: alone indeed
  EXPECT_EQ(mcr::launch_info().launcher, Launcher::single);
}

// Hydra inside a Slurm allocation starts one proxy a node with srun: its ranks inherit the proxy's
// step (task 1 of 2: the second node) and have their own place in PMI_RANK/PMI_SIZE. They were
// read as that task, every rank of the node alike. srun's own PMI-2 agrees with the step.
TEST(Launch, HydraInsideASlurmStepIsRefused) {
  CleanEnv clean({{"SLURM_PROCID", "1"},
                  {"SLURM_NTASKS", "2"},
                  {"SLURM_LOCALID", "0"},
                  {"SLURM_STEP_ID", "0"},
                  {"PMI_RANK", "5"},
                  {"PMI_SIZE", "8"}});
  try {
    mcr::launch_info();
    FAIL() << "a Hydra rank under an srun proxy read as the proxy's task";
  } catch (const mcr::InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("PMI_SIZE=8 (PMI_RANK=5)"), std::string::npos) << what;
    EXPECT_NE(what.find("task 1 of 2"), std::string::npos) << what;
  }
  setenv("PMI_RANK", "1", 1);  // srun --mpi=pmi2: PMI's place is the step's
  setenv("PMI_SIZE", "2", 1);
  const auto l = mcr::launch_info();
  EXPECT_EQ(l.launcher, Launcher::slurm);
  EXPECT_TRUE(l.mpi_world);
  EXPECT_EQ(l.rank, 1);
  EXPECT_EQ(l.size, 2);
}

TEST(Launch, TorchrunHasNoMpiWorld) {
  CleanEnv clean(
      {{"RANK", "1"}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29511"}});
  auto l = mcr::launch_info();
  EXPECT_EQ(l.launcher, Launcher::torchrun);
  EXPECT_FALSE(l.mpi_world);
  EXPECT_EQ(l.master_port, 29511);
}

// MASTER_PORT=0 is "any free port": fine for one rank, which nobody has to find, but the other
// ranks of a larger world could never connect (they would say only that port 0 is out of range,
// and rank 0 would wait its whole timeout for them).
TEST(Launch, MasterPortZeroOnlyForOneRank) {
  CleanEnv clean(
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "0"}});
  try {
    mcr::launch_info();
    FAIL() << "MASTER_PORT=0 with two ranks must be an error";
  } catch (const mcr::InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("MASTER_PORT=0"), std::string::npos) << what;
    EXPECT_NE(what.find("WORLD_SIZE=2"), std::string::npos) << what;
  }
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  EXPECT_EQ(mcr::launch_info().master_port, 0);
}

TEST(Launch, MalformedVariablesAreErrors) {
  CleanEnv clean({{"RANK", "one"},
                  {"WORLD_SIZE", "2"},
                  {"MASTER_ADDR", "127.0.0.1"},
                  {"MASTER_PORT", "29500"}});
  try {
    mcr::launch_info();
    FAIL();
  } catch (const mcr::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("RANK='one'"), std::string::npos);
  }
  setenv("RANK", "2", 1);  // rank >= world size
  EXPECT_THROW(mcr::launch_info(), mcr::InvalidArgument);
  setenv("RANK", "0", 1);
  unsetenv("MASTER_ADDR");
  EXPECT_THROW(mcr::launch_info(), mcr::InvalidArgument);
}

TEST(Launch, GivenStoreNeedsNoMasterAddress) {
  CleanEnv clean({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  EXPECT_THROW(mcr::launch_info(), mcr::InvalidArgument);  // mcr's own store needs MASTER_ADDR
  auto l = mcr::launch_info(/*store_given=*/true);
  EXPECT_EQ(l.launcher, Launcher::torchrun);
  EXPECT_EQ(l.rank, 1);
  EXPECT_EQ(l.size, 2);
}

// srun without an MPI plugin: rank, size and local rank from Slurm, and an address for mcr's own
// store that every task derives alike. Loopback when the step has one node.
TEST(Launch, SlurmWithoutPmiFormsTheWorldThroughTheStore) {
  CleanEnv clean({{"SLURM_PROCID", "2"},
                  {"SLURM_NTASKS", "4"},
                  {"SLURM_LOCALID", "2"},
                  {"SLURM_NODEID", "0"},
                  {"SLURM_STEP_TASKS_PER_NODE", "4"},
                  {"SLURM_STEP_NUM_NODES", "1"},
                  {"SLURM_STEP_NODELIST", "vm"},
                  {"SLURM_JOB_ID", "7"},
                  {"SLURM_STEP_ID", "1"}});
  setenv("SLURM_MPI_TYPE", "none", 1);  // srun --mpi=none: no PMI
  auto l = mcr::launch_info();
  EXPECT_EQ(l.launcher, Launcher::slurm);
  EXPECT_FALSE(l.mpi_world);
  EXPECT_EQ(l.rank, 2);
  EXPECT_EQ(l.size, 4);
  EXPECT_EQ(l.local_rank, 2);
  EXPECT_EQ(l.local_size, 4);
  EXPECT_EQ(l.master_addr, "127.0.0.1");
  EXPECT_EQ(l.master_port, slurm_default_port(7, 1));
}

// A process started in an sbatch script (or an salloc shell) without srun: Slurm's job variables
// say 4 tasks and procid 0, but no step runs it. It is alone; read as srun's rank 0 of 4, it would
// wait for 3 ranks that never come.
TEST(Launch, BatchScriptWithoutSrunIsASingleProcess) {
  CleanEnv clean;
  setenv("SLURM_PROCID", "0", 1);  // what the batch step of `sbatch -n 4` exports
  setenv("SLURM_NTASKS", "4", 1);
  setenv("SLURM_LOCALID", "0", 1);
  setenv("SLURM_JOB_ID", "1030", 1);
  setenv("SLURM_NNODES", "1", 1);
  setenv("SLURM_TASKS_PER_NODE", "4", 1);
  auto l = mcr::launch_info();
  EXPECT_EQ(l.launcher, Launcher::single);
  EXPECT_EQ(l.size, 1);
  setenv("SLURM_STEP_ID", "0", 1);  // the same job's srun step
  l = mcr::launch_info();
  EXPECT_EQ(l.launcher, Launcher::slurm);
  EXPECT_EQ(l.size, 4);
}

// torchrun under mpirun: each worker inherits its parent's MPI rank; RANK and WORLD_SIZE that
// disagree with mpirun's are refused, naming both (agreeing ones, as init_processes sets them,
// are fine).
TEST(Launch, TorchrunUnderMpirunIsRefused) {
  CleanEnv clean({{"OMPI_COMM_WORLD_SIZE", "2"},
                  {"OMPI_COMM_WORLD_RANK", "1"},
                  {"RANK", "1"},
                  {"WORLD_SIZE", "2"}});
  EXPECT_EQ(mcr::launch_info().launcher, Launcher::mpi);
  setenv("RANK", "5", 1);
  setenv("WORLD_SIZE", "8", 1);
  try {
    (void)mcr::launch_info();
    FAIL() << "RANK 5 of 8 under mpirun's rank 1 of 2 accepted";
  } catch (const mcr::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("mpirun says rank 1 of 2 (OMPI_COMM_WORLD_RANK/SIZE) but "
                                         "RANK=5 and WORLD_SIZE=8 say rank 5 of 8"),
              std::string::npos)
        << e.what();
  }
}

// srun --preserve-env passes the job's SLURM_NTASKS on: the step's size is SLURM_STEP_NUM_TASKS
// (a step of 2 in a job of 8 formed a world of 8 and waited for 6 ranks that never came). Ids are
// 32-bit unsigned: an salloc shell's interactive step (0xfffffffa) is Slurm's own, not srun's, and
// a job id past INT_MAX is a job id (both were "not an integer >= 0").
TEST(Launch, SlurmStepSizeAndIds) {
  CleanEnv clean({{"SLURM_PROCID", "1"},
                  {"SLURM_NTASKS", "8"},
                  {"SLURM_STEP_NUM_TASKS", "2"},
                  {"SLURM_STEP_NUM_NODES", "1"},
                  {"SLURM_JOB_ID", "3000000000"},
                  {"SLURM_STEP_ID", "0"},
                  {"SLURM_MPI_TYPE", "none"}});
  auto l = mcr::launch_info();
  EXPECT_EQ(l.launcher, Launcher::slurm);
  EXPECT_EQ(l.size, 2);
  EXPECT_EQ(l.master_port, slurm_default_port(3000000000LL, 0));
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_STEP_ID", "4294967290", 1);  // the interactive step of an salloc shell
  l = mcr::launch_info();
  EXPECT_EQ(l.launcher, Launcher::single);
  EXPECT_EQ(l.size, 1);
  setenv("SLURM_STEP_ID", "4294967296", 1);  // past 32 bits: malformed, named
  try {
    (void)mcr::launch_info();
    FAIL() << "a step id past 32 bits accepted";
  } catch (const mcr::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("SLURM_STEP_ID='4294967296' is not a Slurm id"),
              std::string::npos)
        << e.what();
  }
}

// WORLD_SIZE without RANK: every process would have taken rank 0 and the world never formed.
TEST(Launch, WorldSizeWithoutRankIsAnError) {
  CleanEnv clean({{"WORLD_SIZE", "4"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}});
  try {
    mcr::launch_info();
    FAIL() << "WORLD_SIZE=4 without RANK was read as rank 0";
  } catch (const mcr::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("WORLD_SIZE=4 is set but RANK is not"), std::string::npos)
        << e.what();
  }
  // A store handed to init() comes with its rank (InitOptions).
  EXPECT_NO_THROW(mcr::launch_info(true));
}

// A reserved port range past 65535 is reported under its own name, not as MASTER_PORT.
TEST(Launch, SlurmReservedPortOutOfRangeNamesItsVariable) {
  CleanEnv clean({{"SLURM_PROCID", "0"},
                  {"SLURM_NTASKS", "2"},
                  {"SLURM_STEP_NUM_NODES", "1"},
                  {"SLURM_MPI_TYPE", "none"},
                  {"SLURM_STEP_RESV_PORTS", "70000-70003"},
                  {"SLURM_STEP_ID", "0"}});
  try {
    mcr::launch_info();
    FAIL() << "port 70000 accepted";
  } catch (const mcr::InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("SLURM_STEP_RESV_PORTS='70000-70003'"), std::string::npos) << what;
    EXPECT_EQ(what.find("MASTER_PORT"), std::string::npos) << what;
  }
}

TEST(Launch, SlurmStoreAddressOnSeveralNodes) {
  CleanEnv clean({{"SLURM_PROCID", "5"},
                  {"SLURM_NTASKS", "6"},
                  {"SLURM_LOCALID", "0"},
                  {"SLURM_NODEID", "3"},
                  {"SLURM_STEP_TASKS_PER_NODE", "2(x2),1(x2)"},
                  {"SLURM_STEP_NUM_NODES", "4"},
                  {"SLURM_STEP_NODELIST", "gpu[07-09],cpu1"},
                  {"SLURM_JOB_ID", "1234"},
                  {"SLURM_STEP_RESV_PORTS", "12010-12013"}});
  setenv("SLURM_STEPID", "0", 1);  // the older name
  auto l = mcr::launch_info();
  EXPECT_EQ(l.local_size, 1);
  EXPECT_EQ(l.master_addr, "gpu07");
  EXPECT_EQ(l.master_port, 12010);       // the step's reserved ports come before a derived one
  setenv("MASTER_ADDR", "10.1.2.3", 1);  // the user's choice comes first
  setenv("MASTER_PORT", "29400", 1);
  l = mcr::launch_info();
  EXPECT_EQ(l.master_addr, "10.1.2.3");
  EXPECT_EQ(l.master_port, 29400);
  unsetenv("MASTER_ADDR");
  unsetenv("MASTER_PORT");
  setenv("SLURM_STEP_NODELIST", "gpu[07-09", 1);
  try {
    mcr::launch_info();
    FAIL() << "a malformed node list must be an error";
  } catch (const mcr::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("SLURM_STEP_NODELIST='gpu[07-09'"), std::string::npos);
  }
}

TEST(Launch, SlurmTasksPerNode) {
  EXPECT_EQ(slurm_tasks_on_node("4", 0), 4);
  EXPECT_EQ(slurm_tasks_on_node("4", 1), -1);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 0), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 2), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 4), -1);
  EXPECT_EQ(slurm_tasks_on_node("2(x)", 0), -1);
  EXPECT_EQ(slurm_tasks_on_node("two", 0), -1);
}

TEST(Launch, SlurmFirstHost) {
  EXPECT_EQ(slurm_first_host("vm"), "vm");
  EXPECT_EQ(slurm_first_host("a,b"), "a");
  EXPECT_EQ(slurm_first_host("node[01-04,07],gpu5"), "node01");
  EXPECT_EQ(slurm_first_host("node[3,1-2]"), "node3");
  EXPECT_EQ(slurm_first_host("rack[2-3]-n[008-009]"), "rack2-n008");
  EXPECT_EQ(slurm_first_host("node[01-04"), "");
  EXPECT_EQ(slurm_first_host("node]"), "");
  EXPECT_EQ(slurm_first_host("node[]"), "");
}

TEST(Launch, SlurmDefaultPortsStayBelowTheEphemeralRange) {
  EXPECT_NE(slurm_default_port(41, 0), slurm_default_port(42, 0));
  EXPECT_NE(slurm_default_port(41, 0), slurm_default_port(41, 1));
  for (int job : {0, 1, 1999, 2000, 123456789}) {
    for (int step : {0, 9, 10, 4096}) {
      EXPECT_GE(slurm_default_port(job, step), 10000);
      EXPECT_LT(slurm_default_port(job, step), 30000);
    }
  }
}
