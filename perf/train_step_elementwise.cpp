// Element-wise rate of this CPU: the nanoseconds per element of each memory-bound kernel class of
// the C++ training step (train_step_kernels.hpp), forward and backward, for one core. On a CPU
// these loops are bound by exp, tanh, sqrt, reductions and the dropout masks' random numbers over
// cache-resident tensors, not by DRAM bytes, so `mcr plan` prices them per element where a system
// file gives these rates (`elementwise_ns`, docs/planner.md). Measured once per machine and stored
// in data/systems/local-cpu.json; not refitted per run.
//
//   train_step_elementwise [--hidden 512 --heads 8 --seq 128 --micro-batch 2 --vocab 4096
//                           --params 10000000 --reps 30]
//
// Each kernel runs `reps` times over tensors of the given shape; the median process CPU time per
// call is divided by the element count the planner uses for that class (norm, residual,
// embedding: s*b*h; activation: s*b*d_ff; attention: b*a*s*s scores; cross entropy: b*s*v;
// optimizer: parameters). Prints one JSON object, `elementwise_ns` in the system-file format.
//
// Under `mpirun -np 2` every rank runs the same kernels at the same moment (a barrier before each
// timed call), as the two ranks of the data-parallel step do: the kernels that stream from DRAM
// (Adam) then share the memory bandwidth as they do in the step. Each rank takes its own median;
// the rates printed are the mean over the ranks (the step's components are ranks' means too),
// with the smallest and largest rank's rate in `per_rank_range`.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <mpi.h>
#include <nlohmann/json.hpp>

#include "train_step_kernels.hpp"

namespace {

using ts::Vec;

// More than one rank: start every call together, so that each kernel runs beside its twin.
bool g_together = false;

void together() {
  if (g_together) MPI_Barrier(MPI_COMM_WORLD);
}

double median_ns(int reps, double elements, const std::function<void()>& f) {
  together();
  f();  // warm: first touch of the pages, caches
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    together();
    const double c0 = ts::cpu_now();
    f();
    t.push_back(ts::cpu_now() - c0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2] * 1e9 / elements;
}

int run(int argc, char** argv, int rank, int ranks) {
  std::size_t h = 512, a = 8, s = 128, b = 2, v = 4096, params = 10000000;
  int reps = 30;
  const std::pair<const char*, std::size_t*> sizes[] = {{"--hidden", &h}, {"--heads", &a},
                                                        {"--seq", &s},    {"--micro-batch", &b},
                                                        {"--vocab", &v},  {"--params", &params}};
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 >= argc) throw std::runtime_error(k + " needs a value");
    const long long val = std::atoll(argv[i + 1]);
    if (val <= 0) {
      throw std::runtime_error(k + " is '" + argv[i + 1] + "': it must be a positive integer");
    }
    bool known = k == "--reps";
    if (known) reps = static_cast<int>(val);
    for (auto [name, field] : sizes) {
      if (k == name) *field = static_cast<std::size_t>(val), known = true;
    }
    if (!known) throw std::runtime_error("unknown option " + k);
  }
  const std::size_t T = b * s, ff = 4 * h, S = b * a * s * s;
  const double th = static_cast<double>(T * h);
  Vec x(T * h), y(T * h), z(T * h), g(ff, 1.0f), bias(ff, 0.1f), mu(T), rs(T), dg(ff), db(ff);
  ts::fill_random(x, 1, 1.0f), ts::fill_random(z, 2, 1.0f);
  std::vector<std::uint8_t> mask(std::max(S, T * ff));
  std::uint64_t seed = 7;
  // (class, forward, backward) in a fixed order, the same on every rank, for the reduction.
  std::vector<std::string> classes;
  std::vector<double> rates;
  auto put = [&](const char* cls, double fwd, double bwd) {
    classes.emplace_back(cls);
    rates.push_back(fwd), rates.push_back(bwd);
  };
  // Layer norm.
  put("norm",
      median_ns(reps, th, [&] { ts::layernorm(x, g.data(), bias.data(), T, h, y, mu, rs); }),
      median_ns(reps, th, [&] {
        ts::layernorm_backward(z, x, mu, rs, g.data(), T, h, y, dg.data(), db.data(), true);
      }));
  // Bias-dropout-add and its backward (dropout mask, bias gradient).
  {
    std::span<std::uint8_t> m(mask.data(), T * h);
    std::vector<std::uint8_t> mk(T * h);
    put("residual",
        median_ns(reps, th, [&] { ts::bias_dropout_add(x, bias.data(), z, mk, T, h, y, seed++); }),
        median_ns(reps, th, [&] { ts::dropout_backward(z, mk, y, db.data(), T, h); }));
  }
  // Bias + GeLU over the MLP's d_ff columns.
  {
    Vec u(T * ff), out(T * ff), d(T * ff);
    ts::fill_random(u, 3, 1.0f), ts::fill_random(d, 4, 1.0f);
    const double n = static_cast<double>(T * ff);
    put("activation", median_ns(reps, n, [&] { ts::bias_gelu(u, bias.data(), T, ff, out); }),
        median_ns(reps, n, [&] { ts::gelu_backward(d, u, T, ff, db.data()); }));
  }
  // Causal softmax + dropout over the scores.
  {
    Vec p(S), drop(S), d(S), p0(S);
    std::vector<std::uint8_t> mk(S);
    ts::fill_random(p0, 5, 4.0f), ts::fill_random(d, 6, 1.0f);
    const double n = static_cast<double>(S);
    const double fwd = median_ns(reps, n, [&] {
      std::copy(p0.begin(), p0.end(), p.begin());
      ts::softmax_dropout(p, drop, mk, b * a, s, seed++);
    });
    // The copy that restores the scores is not part of the kernel: time it alone and remove it.
    const double copy = median_ns(reps, n, [&] { std::copy(p0.begin(), p0.end(), p.begin()); });
    put("attention", std::max(0.0, fwd - copy),
        median_ns(reps, n, [&] { ts::softmax_dropout_backward(d, p, mk, b * a, s, 0.125f); }));
  }
  // Embedding gather and scatter-add.
  {
    std::vector<int> tok(T);
    for (auto& t : tok)
      t = static_cast<int>(ts::next(seed) % v);
    Vec emb(v * h), pos(s * h), demb(v * h), dpos(s * h);
    ts::fill_random(emb, 8, 0.02f), ts::fill_random(pos, 9, 0.02f);
    put("embedding", median_ns(reps, th, [&] { ts::embed(tok, emb.data(), pos.data(), s, h, y); }),
        median_ns(reps, th, [&] { ts::embed_backward(tok, z, s, h, demb.data(), dpos.data()); }));
  }
  // Cross entropy over the logits (forward and gradient in one pass), per logit.
  {
    Vec logits(T * v), l0(T * v);
    ts::fill_random(l0, 10, 4.0f);
    std::vector<int> tgt(T);
    for (auto& t : tgt)
      t = static_cast<int>(ts::next(seed) % v);
    const double n = static_cast<double>(T * v);
    const double both = median_ns(reps, n, [&] {
      std::copy(l0.begin(), l0.end(), logits.begin());
      ts::cross_entropy(logits, tgt, T, v);
    });
    const double copy =
        median_ns(reps, n, [&] { std::copy(l0.begin(), l0.end(), logits.begin()); });
    put("cross_entropy", std::max(0.0, both - copy), 0.0);
  }
  // Adam over `params` parameters.
  {
    Vec w(params), gr(params), m1(params, 0), m2(params, 0);
    ts::fill_random(w, 11, 0.02f), ts::fill_random(gr, 12, 0.01f);
    int step = 0;
    const double n = static_cast<double>(params);
    put("optimizer", median_ns(std::max(5, reps / 3), n, [&] { ts::adam(w, gr, m1, m2, ++step); }),
        0.0);
  }
  const int n = static_cast<int>(rates.size());
  std::vector<double> sum(rates.size()), lo(rates.size()), hi(rates.size());
  MPI_Reduce(rates.data(), sum.data(), n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(rates.data(), lo.data(), n, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
  MPI_Reduce(rates.data(), hi.data(), n, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank != 0) return 0;
  nlohmann::json r, range;
  for (std::size_t i = 0; i < classes.size(); ++i) {
    r[classes[i]] = {{"forward", sum[2 * i] / ranks}, {"backward", sum[2 * i + 1] / ranks}};
    range[classes[i]] = {{"forward", {lo[2 * i], hi[2 * i]}},
                         {"backward", {lo[2 * i + 1], hi[2 * i + 1]}}};
  }
  nlohmann::json out = {{"format", "mcr-elementwise-rate"},
                        {"shape",
                         {{"hidden", h},
                          {"heads", a},
                          {"seq", s},
                          {"micro_batch", b},
                          {"vocab", v},
                          {"params", params}}},
                        {"reps", reps},
                        {"ranks", ranks},
                        {"elementwise_ns", r},
                        {"per_rank_range", range}};
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  g_together = ranks > 1;
  int rc = 0;
  try {
    rc = run(argc, argv, rank, ranks);
  } catch (const std::exception& e) {
    // Every rank parses the same arguments, so every rank fails alike and none waits.
    if (rank == 0) std::fprintf(stderr, "train_step_elementwise: %s\n", e.what());
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}
