// Ranks that load different tuning tables fail fast: init() raises MismatchError on every rank.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "mcr/comm.hpp"
#include "mcr/comm/selection.hpp"

int main(int argc, char** argv) {
  const char* rank_env = std::getenv("OMPI_COMM_WORLD_RANK");
  const int rank = rank_env != nullptr ? std::atoi(rank_env) : 0;
  const std::string dir = argc > 1 ? argv[1] : ".";
  // Rank 0 routes all_reduce to mpi, every other rank to gloo.
  mcr::TuningTable table;
  table.entries.push_back(
      {mcr::OpType::all_reduce, "float", 0, {{0, mcr::kMaxBytes, rank == 0 ? "mpi" : "gloo"}}});
  const std::string path = fmt::format("{}/mismatch_table.{}.json", dir, rank);
  table.save(path);
  mcr::InitOptions options;
  options.tuning_file = path;
  int code = 1;
  try {
    mcr::init(options);
    fmt::print(stderr, "FAIL rank {}: init() accepted tables that differ between ranks\n", rank);
  } catch (const mcr::MismatchError& e) {
    const std::string what = e.what();
    code = what.find("tuning table") != std::string::npos ? 0 : 1;
    fmt::print("rank {}: MismatchError as expected: {}\n", rank, what);
  } catch (const std::exception& e) {
    fmt::print(stderr, "FAIL rank {}: expected MismatchError, got: {}\n", rank, e.what());
  }
  mcr::finalize();
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
  std::remove(path.c_str());
  return code;
}
