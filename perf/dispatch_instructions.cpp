// Instructions per call on the dispatch path, counted by callgrind: what the regression guard
// perf.dispatch_instructions (tests/perf) checks against its budget,
// docs/performance/dispatch.md#instruction-budget.
//
// Issues a 4-byte f32 all_reduce (sum) on the MPI backend in two ways, each first warmed up
// uninstrumented and then measured for --calls calls:
//   override   forced per call (CallOptions::backend = "mpi"), as bench_dispatch does;
//   automatic  chosen by the selector's plan (CallOptions{}).
// Run under callgrind with collection limited to the facade, each phase is dumped on its own:
//
//   valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no
//            --toggle-collect='mcr::Communicator::all_reduce(*' --callgrind-out-file=cg.out
//            bench_dispatch_instructions --calls 2000
//
// gives cg.out.1 (override) and cg.out.2 (automatic), each holding exactly the instructions
// executed inside those calls, nothing of start-up, warm-up or the loop around them. Outside
// valgrind the client requests do nothing and the program just runs the calls.
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/core.h>

#include "mcr/comm.hpp"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
constexpr bool kClientRequests = true;
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_DUMP_STATS_AT(name) (void)(name)
constexpr bool kClientRequests = false;
#endif

int main(int argc, char** argv) {
  int calls = 2000;
  int warmup = 200;  // fills every cache on the path (plans, override, lazy symbol binding)
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--calls") == 0) calls = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--warmup") == 0) warmup = std::atoi(argv[i + 1]);
  }
  if (calls <= 0 || warmup < 0) {
    fmt::print(stderr, "usage: bench_dispatch_instructions [--calls N>0] [--warmup N>=0]\n");
    return 2;
  }
  mcr::Communicator comm = mcr::init();
  std::vector<float> in(1, 1.0f), out(1, 0.0f);
  const mcr::CallOptions forced{.backend = "mpi"};
  const mcr::CallOptions automatic{};
  if (comm.explain(mcr::OpType::all_reduce, mcr::DType::f32, sizeof(float)).backend != "mpi") {
    fmt::print(stderr, "the selector does not choose mpi for a 4-byte all_reduce here\n");
    return 1;
  }

  for (int i = 0; i < warmup; ++i) {
    comm.all_reduce(in, out, mcr::ReduceOp::sum, forced);
    comm.all_reduce(in, out, mcr::ReduceOp::sum, automatic);
  }
  CALLGRIND_START_INSTRUMENTATION;
  CALLGRIND_ZERO_STATS;
  for (int i = 0; i < calls; ++i)
    comm.all_reduce(in, out, mcr::ReduceOp::sum, forced);
  CALLGRIND_DUMP_STATS_AT("override");
  for (int i = 0; i < calls; ++i)
    comm.all_reduce(in, out, mcr::ReduceOp::sum, automatic);
  CALLGRIND_DUMP_STATS_AT("automatic");
  CALLGRIND_STOP_INSTRUMENTATION;

  const bool right = out[0] == static_cast<float>(comm.size());
  if (comm.rank() == 0) {
    // Read by tests/perf/dispatch_instructions.sh.
    fmt::print("ranks {} calls {} client_requests {}\n", comm.size(), calls,
               kClientRequests ? "yes" : "no");
  }
  if (!right) fmt::print(stderr, "wrong result: {} != {}\n", out[0], comm.size());
  mcr::finalize();
  return right ? 0 : 1;
}
