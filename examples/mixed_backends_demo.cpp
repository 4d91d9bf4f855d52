// A short mixed-backend run: each operation goes to the backend the rules pick for its op and size,
// sync and async interleaved; rank 0 prints which backend ran what, and every result is verified.
//
//   mpirun -np 2 mixed_backends_demo
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <numeric>
#include <vector>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "mcr/comm.hpp"

namespace {

// Prints every completed operation on rank 0: the communication log in its simplest form.
class PrintOps final : public mcr::OpObserver {
 public:
  void on_complete(const mcr::OpRecord& r) noexcept override {
    if (r.global_rank != 0) return;
    const double us = std::chrono::duration<double, std::micro>(r.end - r.start).count();
    fmt::print("  #{:<3} {:<15} {:<5} {:>9} B  {:<5} on {:<5} {:>9.1f} us\n", r.sequence,
               mcr::to_string(r.op), r.async ? "async" : "sync", r.bytes, mcr::to_string(r.dtype),
               r.backend, us);
  }
};

int failures = 0;
void expect(bool ok, const char* what, int rank) {
  if (!ok) {
    ++failures;
    fmt::print(stderr, "rank {}: WRONG result: {}\n", rank, what);
  }
}

}  // namespace

int main() {
  mcr::InitOptions opts;
  // Small all_reduce on MPI, large on Gloo; gathers on Gloo; everything else by default priority.
  if (std::getenv("MCR_RULES") == nullptr)
    opts.rules = "all_reduce:0-64K=mpi;all_reduce:64K-=gloo;all_gather:*=gloo";
  auto comm = mcr::init(opts);
  const int rank = comm.rank(), n = comm.size();
  comm.set_observer(std::make_shared<PrintOps>());
  if (rank == 0)
    fmt::print("mcr mixed-backend demonstration on {} ranks, backends: {}\n", n,
               fmt::join(comm.backends(), ", "));

  for (std::size_t count : {std::size_t{16}, std::size_t{1} << 18}) {
    std::vector<float> x(count, static_cast<float>(rank + 1));
    comm.all_reduce(x, mcr::ReduceOp::sum);
    expect(x.front() == n * (n + 1) / 2.0f && x.back() == x.front(), "all_reduce sum", rank);
  }
  std::vector<std::int32_t> mine(4, rank), all(4 * static_cast<std::size_t>(n));
  auto gathered = comm.iall_gather(mine, all);
  std::vector<double> b(1000, rank == n - 1 ? 3.5 : 0.0);
  comm.broadcast(b, n - 1);
  gathered.wait();
  for (int r = 0; r < n; ++r)
    expect(all[static_cast<std::size_t>(4 * r)] == r, "all_gather", rank);
  expect(b[999] == 3.5, "broadcast from the last rank", rank);

  std::vector<std::int64_t> send(static_cast<std::size_t>(n)), recv(static_cast<std::size_t>(n));
  for (int j = 0; j < n; ++j)
    send[static_cast<std::size_t>(j)] = rank * 100 + j;
  // Forced onto Gloo where this run has it (a per-call override beside the rules); where it does
  // not (a build without Gloo, MCR_BACKENDS=mpi), selected as every other call.
  const auto usable = comm.backends();
  const bool has_gloo = std::find(usable.begin(), usable.end(), "gloo") != usable.end();
  comm.all_to_all(send, recv, {.backend = has_gloo ? "gloo" : ""});
  for (int j = 0; j < n; ++j)
    expect(recv[static_cast<std::size_t>(j)] == j * 100 + rank, "all_to_all", rank);

  if (n > 1) {
    std::vector<float> token(8, 0.0f);
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    auto r = comm.irecv(token, prev);
    std::vector<float> out(8, static_cast<float>(rank));
    comm.send(out, next);
    r.wait();
    expect(token[7] == static_cast<float>(prev), "ring send/recv", rank);
  }
  // Every rank's checks, not rank 0's alone: a wrong result on another rank fails the demo too.
  std::vector<std::int32_t> wrong{failures};
  comm.all_reduce(wrong, mcr::ReduceOp::sum);
  failures = wrong[0];
  if (rank == 0) fmt::print("{}\n", failures == 0 ? "all results verified" : "FAILED");
  mcr::finalize();
  return failures == 0 ? 0 : 1;
}
