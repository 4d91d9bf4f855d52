// Uses an installed mcr: an all_reduce across the ranks it was started with, checked against the
// closed form, a one-point verified sweep of the benchmark library, a preset and a system read from
// the installed data directory, and the GEMM benchmark's statistics and BLAS probe: one call into
// each installed library, so that a link that misses one fails. Built both through find_package
// and through pkg-config (tests/install/check_install.cmake).
#include <cstdio>
#include <vector>

#include <mcr/bench.hpp>
#include <mcr/codesign/model.hpp>
#include <mcr/comm.hpp>
#include <mcr/gemmbench/runner.hpp>
#include <mcr/gemmbench/stats.hpp>
#include <mcr/plan/system.hpp>

int main() {
  auto comm = mcr::init();
  const int n = comm.size();
  std::vector<double> v(1000);
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<double>(comm.rank() + 1) * i;
  comm.all_reduce(v, mcr::ReduceOp::sum);
  // sum over ranks r of (r + 1) * i = i * n (n + 1) / 2
  int wrong = 0;
  for (std::size_t i = 0; i < v.size(); ++i)
    wrong += v[i] != i * n * (n + 1) / 2.0;
  mcr::bench::SweepOptions sweep;  // all_reduce on automatic selection, checked element by element
  sweep.sizes = {4096};
  sweep.iterations = 2;
  sweep.warmup = 1;
  const auto swept = mcr::bench::run_sweep(comm, sweep);
  wrong += swept.rows.size() == 1 && swept.wrong == 0 ? 0 : 1;
  const auto model = mcr::codesign::load_preset("gpt3-2.7b");
  const auto system = mcr::plan::system_from_catalog("dgx-h100");
  wrong += system.gpus_per_node == 8 ? 0 : 1;
  wrong += mcr::codesign::bench::median({3.0, 1.0, 2.0}) == 2.0 ? 0 : 1;
  std::printf(
      "rank %d of %d: all_reduce %s; preset gpt3-2.7b has hidden size %lld; dgx-h100 has "
      "%d GPUs a node; BLAS %s\n",
      comm.rank(), n, wrong == 0 ? "correct" : "WRONG", static_cast<long long>(model.h),
      system.gpus_per_node, mcr::codesign::bench::cblas_available() ? "available" : "absent");
  mcr::finalize();
  return wrong == 0 && model.h == 2560 ? 0 : 1;
}
