// `mcr bench` names the backend that ran each `auto` row, in the form it timed: with a table tuned
// per form (sync all_reduce on mpi, async on gloo), a sweep of the blocking calls says mpi and a
// sweep of the i* calls says gloo. Before, both said the blocking call's backend. (2 ranks)
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "mcr/bench.hpp"
#include "mcr/comm.hpp"
#include "mcr/comm/selection.hpp"

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  mcr::TuningTable table;
  mcr::TuningEntry sync{mcr::OpType::all_reduce, "any", 0, {{0, mcr::kMaxBytes, "mpi"}}};
  sync.form = "sync";
  mcr::TuningEntry async = sync;
  async.form = "async";
  async.ranges[0].backend = "gloo";
  table.entries = {sync, async};
  mcr::InitOptions options;
  mcr::Communicator world;
  const char* rank_env = std::getenv("OMPI_COMM_WORLD_RANK");
  const std::string path =
      fmt::format("{}/sweep_form_table.{}.json", dir, rank_env != nullptr ? rank_env : "0");
  table.save(path);
  options.tuning_file = path;
  world = mcr::init(options);
  int failures = 0;
  for (const bool is_async : {false, true}) {
    mcr::bench::SweepOptions o;
    o.sizes = {64};
    o.iterations = 2;
    o.warmup = 1;
    o.min_time_s = 0;
    o.async = is_async;
    const auto result = mcr::bench::run_sweep(world, o);
    const std::string want = is_async ? "gloo" : "mpi";
    if (result.rows.size() != 1 || result.rows[0].backend != want || result.wrong != 0) {
      fmt::print(stderr, "FAIL rank {}: {} sweep: {} rows, backend '{}', {} wrong; want {}\n",
                 world.rank(), is_async ? "async" : "sync", result.rows.size(),
                 result.rows.empty() ? "" : result.rows[0].backend, result.wrong, want);
      ++failures;
    }
  }
  if (failures == 0 && world.rank() == 0) fmt::print("sweep labels each form's backend: OK\n");
  world = mcr::Communicator();
  mcr::finalize();
  std::remove(path.c_str());
  return failures == 0 ? 0 : 1;
}
