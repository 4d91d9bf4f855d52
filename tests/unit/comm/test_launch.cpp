#include <gtest/gtest.h>

#include <cstdlib>

#include "bootstrap/bootstrap.hpp"
#include "mcr/errors.hpp"

using namespace mcr::detail;

namespace {
// Clears every launcher variable for the duration of a test.
struct CleanEnv {
  CleanEnv() {
    for (const char* v :
         {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
          "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
          "SLURM_NTASKS_PER_NODE", "PMIX_RANK", "RANK", "WORLD_SIZE", "LOCAL_RANK",
          "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
      unsetenv(v);
    }
  }
};
}  // namespace

TEST(Launch, SingleProcess) {
  CleanEnv clean;
  auto l = detect_launch();
  EXPECT_EQ(l.launcher, Launcher::single);
  EXPECT_EQ(l.size, 1);
}

TEST(Launch, OpenMpi) {
  CleanEnv clean;
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  auto l = detect_launch();
  EXPECT_EQ(l.launcher, Launcher::mpi);
  EXPECT_TRUE(l.mpi_world);
  EXPECT_EQ(l.rank, 3);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.local_size, 2);
}

TEST(Launch, SlurmWithPmix) {
  CleanEnv clean;
  setenv("SLURM_PROCID", "5", 1);
  setenv("SLURM_NTASKS", "8", 1);
  setenv("SLURM_LOCALID", "1", 1);
  setenv("SLURM_NTASKS_PER_NODE", "4", 1);
  setenv("PMIX_RANK", "5", 1);
  auto l = detect_launch();
  EXPECT_EQ(l.launcher, Launcher::slurm);
  EXPECT_TRUE(l.mpi_world);
  EXPECT_EQ(l.rank, 5);
  EXPECT_EQ(l.local_size, 4);
}

TEST(Launch, TorchrunHasNoMpiWorld) {
  CleanEnv clean;
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "3", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29511", 1);
  auto l = detect_launch();
  EXPECT_EQ(l.launcher, Launcher::torchrun);
  EXPECT_FALSE(l.mpi_world);
  EXPECT_EQ(l.master_port, 29511);
}

TEST(Launch, MalformedVariablesAreErrors) {
  CleanEnv clean;
  setenv("RANK", "one", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29500", 1);
  try {
    detect_launch();
    FAIL();
  } catch (const mcr::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("RANK='one'"), std::string::npos);
  }
  setenv("RANK", "2", 1);  // rank >= world size
  EXPECT_THROW(detect_launch(), mcr::InvalidArgument);
  setenv("RANK", "0", 1);
  unsetenv("MASTER_ADDR");
  EXPECT_THROW(detect_launch(), mcr::InvalidArgument);
}

TEST(Launch, GivenStoreNeedsNoMasterAddress) {
  CleanEnv clean;
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  EXPECT_THROW(detect_launch(), mcr::InvalidArgument);  // mcr's own store needs MASTER_ADDR
  auto l = detect_launch(/*store_given=*/true);
  EXPECT_EQ(l.launcher, Launcher::torchrun);
  EXPECT_EQ(l.rank, 1);
  EXPECT_EQ(l.size, 2);
}
