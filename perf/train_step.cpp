// A data-parallel GPT training step in C++, for checking `mcr plan` end to end on the CPU: every
// GEMM the planner lists for a layer (codesign::layer_gemms with training) and for the logits runs
// for real through CBLAS with the same M, N, K, the memory-bound kernels it models (layer norms,
// bias-dropout-adds, GeLU, softmax and dropout over the scores, embedding, cross entropy, Adam)
// run over the same tensors, and the gradients are summed across the ranks by mcr::Communicator
// in buckets, each reduced as soon as the backward pass has produced it (as DDP does). fp32, one
// BLAS thread per rank. The reductions are blocking: with one core per rank there is no spare core
// to overlap them with, so the matching prediction is `mcr plan ... --no-dp-overlap`.
//
//   mpirun -np 2 train_step [--hidden 512 --heads 8 --layers 2 --seq 128 --micro-batch 2
//                            --vocab 4096 --steps 20 --warmup 3 --bucket-mb 25]
//
// Rank 0 prints one JSON object: the median step time with a 95 % interval over the timed steps,
// the time inside GEMMs, the gradient all_reduce, the optimizer and elsewhere (by the wall clock
// and by process CPU time), how long the ranks waited for each other inside the all_reduces
// (`comm_wait_s`, from when each rank entered them), and whether the reduced gradients matched an
// independent check (raw MPI on sampled values and per-bucket sums).
#include <cblas.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcr/bench.hpp"
#include "mcr/comm.hpp"
#include "train_step_kernels.hpp"

namespace {

using ts::Clock;
using ts::Vec;

struct Config {
  int h = 512, a = 8, L = 2, s = 128, b = 2, v = 4096, steps = 20, warmup = 3;
  double bucket_mb = 25;
};

using ts::cpu_now;
using ts::wall_now;

// Offsets of one layer's parameters in the flat parameter vector.
struct LayerParams {
  std::size_t ln1g, ln1b, wqkv, bqkv, wo, bo, ln2g, ln2b, w1, b1, w2, b2, end;
};

// What the forward pass keeps for the backward pass.
struct LayerActs {
  Vec x, ln1, mu1, rs1, qkv, probs, pdrop, ctx, xmid, ln2, mu2, rs2, u, g;
  std::vector<std::uint8_t> mask_attn, mask1, mask2;
};

class Trainer {
 public:
  Trainer(const Config& c, mcr::Communicator& comm) : c_(c), comm_(comm) {
    const std::size_t h = c.h, ff = 4 * h, T = static_cast<std::size_t>(c.b) * c.s;
    std::size_t off = 0;
    auto take = [&](std::size_t n) {
      const std::size_t o = off;
      off += n;
      return o;
    };
    emb_ = take(c.v * h);
    pos_ = take(c.s * h);
    for (int l = 0; l < c.L; ++l) {
      LayerParams p{};
      p.ln1g = take(h), p.ln1b = take(h), p.wqkv = take(h * 3 * h), p.bqkv = take(3 * h);
      p.wo = take(h * h), p.bo = take(h), p.ln2g = take(h), p.ln2b = take(h);
      p.w1 = take(h * ff), p.b1 = take(ff), p.w2 = take(ff * h), p.b2 = take(h);
      p.end = off;
      layers_.push_back(p);
    }
    lnfg_ = take(h), lnfb_ = take(h), wout_ = take(h * c.v);
    w_.resize(off), grad_.resize(off), m1_.assign(off, 0), m2_.assign(off, 0);
    ts::fill_random(w_, 1, 0.02f);
    for (const auto& p : layers_) {
      std::fill_n(&w_[p.ln1g], h, 1.0f), std::fill_n(&w_[p.ln2g], h, 1.0f);
    }
    std::fill_n(&w_[lnfg_], h, 1.0f);
    acts_.resize(c.L);
    tokens_.resize(T);
    std::uint64_t st = 12345 + 7919 * static_cast<std::uint64_t>(comm.rank());
    for (auto& t : tokens_)
      t = static_cast<int>(ts::next(st) % static_cast<std::uint64_t>(c.v));
    targets_ = tokens_;
    std::rotate(targets_.begin(), targets_.begin() + 1, targets_.end());
    // Buckets from the end of the flat gradient: the backward pass produces it from the end.
    const auto per = std::max<std::size_t>(1, static_cast<std::size_t>(c.bucket_mb * 1e6 / 4));
    for (std::size_t hi = off; hi > 0;) {
      const std::size_t lo = hi > per ? hi - per : 0;
      buckets_.push_back({lo, hi});
      hi = lo;
    }
  }

  std::size_t params() const { return w_.size(); }
  std::size_t buckets() const { return buckets_.size(); }
  /// When this rank entered each bucket's all_reduce in the last step (steady clock, which all
  /// processes of one host share): the ranks' spread is time the earlier one waits inside it.
  const std::vector<double>& arrivals() const { return arrivals_; }
  double gemm_flops() const { return clock_.flops; }

  // One step; returns the bucket checks' verdict when `verify` (true otherwise).
  bool step(bool verify, Clock& clock) {
    clock_ = Clock{};
    verify_ = verify;
    ok_ = true;
    next_bucket_ = 0;
    arrivals_.clear();
    forward_backward();
    flush(0);
    const double t0 = wall_now(), c0 = cpu_now();
    ts::adam(w_, grad_, m1_, m2_, ++t_);
    clock_.opt = wall_now() - t0, clock_.opt_cpu = cpu_now() - c0;
    clock = clock_;
    return ok_;
  }

 private:
  float* W(std::size_t o) { return &w_[o]; }
  float* G(std::size_t o) { return &grad_[o]; }

  void forward_backward() {
    const std::size_t h = c_.h, T = tokens_.size(), V = c_.v;
    Vec x(T * h);
    ts::embed(tokens_, W(emb_), W(pos_), c_.s, h, x);
    for (int l = 0; l < c_.L; ++l)
      x = layer_forward(layers_[l], acts_[l], std::move(x));
    // Final norm, logits, cross entropy (its backward writes dlogits in place).
    Vec lnf(T * h), muf(T), rsf(T), logits(T * V);
    ts::layernorm(x, W(lnfg_), W(lnfb_), T, h, lnf, muf, rsf);
    ts::gemm(clock_, false, false, T, V, h, lnf.data(), W(wout_), logits.data());
    ts::cross_entropy(logits, targets_, T, V);
    ts::gemm(clock_, true, false, h, V, T, lnf.data(), logits.data(), G(wout_));  // wgrad
    Vec dlnf(T * h), dx(T * h);
    ts::gemm(clock_, false, true, T, h, V, logits.data(), W(wout_), dlnf.data());  // dgrad
    ts::layernorm_backward(dlnf, x, muf, rsf, W(lnfg_), T, h, dx, G(lnfg_), G(lnfb_), false);
    flush(layers_.back().end);
    for (int l = c_.L - 1; l >= 0; --l) {
      layer_backward(layers_[l], acts_[l], dx);
      flush(layers_[l].ln1g);
    }
    ts::embed_backward(tokens_, dx, c_.s, h, G(emb_), G(pos_));
  }

  Vec layer_forward(const LayerParams& p, LayerActs& A, Vec x) {
    const std::size_t h = c_.h, ff = 4 * h, T = tokens_.size(), s = c_.s, d = h / c_.a;
    A.x = std::move(x);
    A.ln1.resize(T * h), A.mu1.resize(T), A.rs1.resize(T);
    ts::layernorm(A.x, W(p.ln1g), W(p.ln1b), T, h, A.ln1, A.mu1, A.rs1);
    A.qkv.resize(T * 3 * h);
    ts::gemm(clock_, false, false, T, 3 * h, h, A.ln1.data(), W(p.wqkv), A.qkv.data());
    ts::add_bias(A.qkv, W(p.bqkv), T, 3 * h);
    // Attention per (sequence, head): scores, causal softmax, dropout, then the weighted values.
    const std::size_t S = static_cast<std::size_t>(c_.b) * c_.a * s * s;
    A.probs.resize(S), A.pdrop.resize(S), A.mask_attn.resize(S), A.ctx.resize(T * h);
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    for (int bi = 0; bi < c_.b; ++bi) {
      for (int hd = 0; hd < c_.a; ++hd) {
        const std::size_t row = bi * s * 3 * h, col = hd * d;
        float* P = &A.probs[(bi * c_.a + hd) * s * s];
        ts::gemm(clock_, false, true, s, s, d, &A.qkv[row + col], &A.qkv[row + h + col], P, 3 * h,
                 3 * h, s, scale);
      }
    }
    ts::softmax_dropout(A.probs, A.pdrop, A.mask_attn, c_.b * c_.a, s, seed_++);
    for (int bi = 0; bi < c_.b; ++bi) {
      for (int hd = 0; hd < c_.a; ++hd) {
        const std::size_t row = bi * s * 3 * h, col = hd * d;
        ts::gemm(clock_, false, false, s, d, s, &A.pdrop[(bi * c_.a + hd) * s * s],
                 &A.qkv[row + 2 * h + col], &A.ctx[bi * s * h + col], s, 3 * h, h);
      }
    }
    Vec y(T * h);
    ts::gemm(clock_, false, false, T, h, h, A.ctx.data(), W(p.wo), y.data());
    A.xmid.resize(T * h), A.mask1.resize(T * h);
    ts::bias_dropout_add(y, W(p.bo), A.x, A.mask1, T, h, A.xmid, seed_++);
    A.ln2.resize(T * h), A.mu2.resize(T), A.rs2.resize(T);
    ts::layernorm(A.xmid, W(p.ln2g), W(p.ln2b), T, h, A.ln2, A.mu2, A.rs2);
    A.u.resize(T * ff), A.g.resize(T * ff);
    ts::gemm(clock_, false, false, T, ff, h, A.ln2.data(), W(p.w1), A.u.data());
    ts::bias_gelu(A.u, W(p.b1), T, ff, A.g);
    ts::gemm(clock_, false, false, T, h, ff, A.g.data(), W(p.w2), y.data());
    Vec out(T * h);
    A.mask2.resize(T * h);
    ts::bias_dropout_add(y, W(p.b2), A.xmid, A.mask2, T, h, out, seed_++);
    return out;
  }

  // dx: gradient of the layer's output on entry, of its input on return.
  void layer_backward(const LayerParams& p, LayerActs& A, Vec& dx) {
    const std::size_t h = c_.h, ff = 4 * h, T = tokens_.size(), s = c_.s, d = h / c_.a;
    // MLP: dz = dropout'(dx); the residual passes dx through to x_mid.
    Vec dz(T * h), dg(T * ff);
    ts::dropout_backward(dx, A.mask2, dz, G(p.b2), T, h);
    ts::gemm(clock_, true, false, ff, h, T, A.g.data(), dz.data(), G(p.w2));
    ts::gemm(clock_, false, true, T, ff, h, dz.data(), W(p.w2), dg.data());
    ts::gelu_backward(dg, A.u, T, ff, G(p.b1));
    ts::gemm(clock_, true, false, h, ff, T, A.ln2.data(), dg.data(), G(p.w1));
    Vec dln(T * h), dmid = dx;
    ts::gemm(clock_, false, true, T, h, ff, dg.data(), W(p.w1), dln.data());
    ts::layernorm_backward(dln, A.xmid, A.mu2, A.rs2, W(p.ln2g), T, h, dmid, G(p.ln2g), G(p.ln2b),
                           true);
    // Attention output projection.
    Vec dy(T * h), dctx(T * h);
    ts::dropout_backward(dmid, A.mask1, dy, G(p.bo), T, h);
    ts::gemm(clock_, true, false, h, h, T, A.ctx.data(), dy.data(), G(p.wo));
    ts::gemm(clock_, false, true, T, h, h, dy.data(), W(p.wo), dctx.data());
    // Attention core: gradients of the dropped probabilities and of V, then of the scores, Q, K.
    Vec dqkv(T * 3 * h), dP(static_cast<std::size_t>(c_.b) * c_.a * s * s);
    for (int bi = 0; bi < c_.b; ++bi) {
      for (int hd = 0; hd < c_.a; ++hd) {
        const std::size_t row = bi * s * 3 * h, col = hd * d, o = (bi * c_.a + hd) * s * s;
        ts::gemm(clock_, false, true, s, s, d, &dctx[bi * s * h + col], &A.qkv[row + 2 * h + col],
                 &dP[o], h, 3 * h, s);
        ts::gemm(clock_, true, false, s, d, s, &A.pdrop[o], &dctx[bi * s * h + col],
                 &dqkv[row + 2 * h + col], s, h, 3 * h);
      }
    }
    ts::softmax_dropout_backward(dP, A.probs, A.mask_attn, c_.b * c_.a, s,
                                 1.0f / std::sqrt(static_cast<float>(d)));
    for (int bi = 0; bi < c_.b; ++bi) {
      for (int hd = 0; hd < c_.a; ++hd) {
        const std::size_t row = bi * s * 3 * h, col = hd * d, o = (bi * c_.a + hd) * s * s;
        ts::gemm(clock_, false, false, s, d, s, &dP[o], &A.qkv[row + h + col], &dqkv[row + col], s,
                 3 * h, 3 * h);
        ts::gemm(clock_, true, false, s, d, s, &dP[o], &A.qkv[row + col], &dqkv[row + h + col], s,
                 3 * h, 3 * h);
      }
    }
    ts::column_sum(dqkv, T, 3 * h, G(p.bqkv));
    ts::gemm(clock_, true, false, h, 3 * h, T, A.ln1.data(), dqkv.data(), G(p.wqkv));
    ts::gemm(clock_, false, true, T, h, 3 * h, dqkv.data(), W(p.wqkv), dln.data());
    dx = dmid;
    ts::layernorm_backward(dln, A.x, A.mu1, A.rs1, W(p.ln1g), T, h, dx, G(p.ln1g), G(p.ln1b), true);
  }

  // All-reduces every bucket lying wholly at or above `ready` that is not reduced yet.
  void flush(std::size_t ready) {
    while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].first >= ready) {
      const auto [lo, hi] = buckets_[next_bucket_++];
      std::span<float> part(&grad_[lo], hi - lo);
      ts::BucketCheck check;
      if (verify_) check = ts::BucketCheck::before(part);
      const double t0 = wall_now(), c0 = cpu_now();
      arrivals_.push_back(t0);
      comm_.all_reduce(mcr::Tensor(part), mcr::ReduceOp::sum);
      clock_.comm += wall_now() - t0;
      clock_.comm_cpu += cpu_now() - c0;
      if (verify_) ok_ = check.after(part) && ok_;
    }
  }

  Config c_;
  mcr::Communicator& comm_;
  std::size_t emb_ = 0, pos_ = 0, lnfg_ = 0, lnfb_ = 0, wout_ = 0;
  std::vector<LayerParams> layers_;
  std::vector<LayerActs> acts_;
  Vec w_, grad_, m1_, m2_;
  std::vector<int> tokens_, targets_;
  std::vector<std::pair<std::size_t, std::size_t>> buckets_;
  std::size_t next_bucket_ = 0;
  std::vector<double> arrivals_;
  Clock clock_;
  bool verify_ = false, ok_ = true;
  std::uint64_t seed_ = 1;
  int t_ = 0;
};

Config parse(int argc, char** argv) {
  Config c;
  const std::pair<const char*, int*> ints[] = {
      {"--hidden", &c.h}, {"--heads", &c.a},       {"--layers", &c.L},    {"--seq", &c.s},
      {"--vocab", &c.v},  {"--micro-batch", &c.b}, {"--steps", &c.steps}, {"--warmup", &c.warmup}};
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 >= argc) throw std::runtime_error(k + " needs a value");
    const double v = std::atof(argv[i + 1]);
    bool known = k == "--bucket-mb";
    if (known) c.bucket_mb = v;
    for (auto [name, field] : ints) {
      if (k == name) *field = static_cast<int>(v), known = true;
    }
    if (!known) throw std::runtime_error("unknown option " + k);
  }
  if (c.h <= 0 || c.a <= 0 || c.h % c.a != 0 || c.L <= 0 || c.s <= 0 || c.b <= 0 || c.v <= 0 ||
      c.steps <= 0 || c.warmup < 0 || !(c.bucket_mb > 0)) {
    throw std::runtime_error("sizes must be positive and --hidden divisible by --heads");
  }
  return c;
}

// Median and its distribution-free 95 % interval: order statistics at ranks (n -+ 1.96 sqrt(n))/2.
nlohmann::json summary(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  const double n = static_cast<double>(x.size());
  const auto at = [&](double r) {
    const auto i = static_cast<std::ptrdiff_t>(std::clamp(std::round(r), 1.0, n)) - 1;
    return x[static_cast<std::size_t>(i)];
  };
  return {{"median", mcr::bench::median(x)},
          {"ci95_low", at((n - 1.96 * std::sqrt(n)) / 2)},
          {"ci95_high", at((n + 1.96 * std::sqrt(n)) / 2 + 1)},
          {"min", x.front()},
          {"max", x.back()}};
}

}  // namespace

int main(int argc, char** argv) {
  mcr::Communicator comm = mcr::init();
  int rc = 0;
  try {
    const Config c = parse(argc, argv);
    openblas_set_num_threads(1);  // one core per rank, as the planner's local-cpu system
    Trainer trainer(c, comm);
    Clock clk;
    bool verified = true;
    for (int i = 0; i < c.warmup; ++i)
      verified = trainer.step(i == 0, clk) && verified;
    // Per step, per rank: wall, CPU, GEMM and all_reduce seconds.
    std::vector<double> wall, cpu, gemm, red, opt, gemm_cpu, red_cpu, opt_cpu, arrive;
    for (int i = 0; i < c.steps; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = wall_now(), c0 = cpu_now();
      trainer.step(false, clk);
      wall.push_back(wall_now() - t0), cpu.push_back(cpu_now() - c0);
      gemm.push_back(clk.gemm), red.push_back(clk.comm);
      gemm_cpu.push_back(clk.gemm_cpu), red_cpu.push_back(clk.comm_cpu);
      opt.push_back(clk.opt), opt_cpu.push_back(clk.opt_cpu);
      arrive.insert(arrive.end(), trainer.arrivals().begin(), trainer.arrivals().end());
    }
    verified =
        trainer.step(true, clk) && verified;  // untimed: the check costs a pass and MPI calls
    // A step lasts as long as its slowest rank; the split is the mean of the ranks.
    const int n = c.steps;
    MPI_Allreduce(MPI_IN_PLACE, wall.data(), n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, cpu.data(), n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    for (auto* v : {&gemm, &red, &opt, &gemm_cpu, &red_cpu, &opt_cpu}) {
      MPI_Allreduce(MPI_IN_PLACE, v->data(), n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      for (auto& x : *v)
        x /= comm.size();
    }
    // Waiting for the other ranks inside the all_reduces, per step (mean of the ranks): for each
    // bucket, the last rank's arrival less the mean arrival. `mcr tune` leaves this out (it starts
    // its ranks together), so it tells the reduction's own time apart from the ranks' imbalance.
    const int na = static_cast<int>(arrive.size());
    std::vector<double> last(arrive), mean(arrive), wait(static_cast<std::size_t>(n), 0.0);
    MPI_Allreduce(MPI_IN_PLACE, last.data(), na, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, mean.data(), na, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    const std::size_t per_step = trainer.buckets();
    for (std::size_t k = 0; k < arrive.size(); ++k)
      wait[k / per_step] += last[k] - mean[k] / comm.size();
    std::vector<double> own(static_cast<std::size_t>(n));  // wall time in all_reduce less waiting
    for (std::size_t i = 0; i < own.size(); ++i)
      own[i] = red[i] - wait[i];
    int ok = verified ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    std::vector<double> other(n), other_cpu(n);
    for (int i = 0; i < n; ++i) {
      other[i] = wall[i] - gemm[i] - red[i] - opt[i];
      other_cpu[i] = cpu[i] - gemm_cpu[i] - red_cpu[i] - opt_cpu[i];
    }
    if (comm.rank() == 0) {
      nlohmann::json j = {{"format", "mcr-train-step"},
                          {"model",
                           {{"hidden", c.h},
                            {"heads", c.a},
                            {"layers", c.L},
                            {"seq", c.s},
                            {"micro_batch", c.b},
                            {"vocab", c.v},
                            {"dtype", "fp32"},
                            {"tied", false}}},
                          {"ranks", comm.size()},
                          {"steps", c.steps},
                          {"warmup", c.warmup},
                          {"params", trainer.params()},
                          {"gradient_bytes", trainer.params() * 4},
                          {"buckets", trainer.buckets()},
                          {"gemm_flops_per_step", trainer.gemm_flops()},
                          {"step_time_s", summary(wall)},
                          {"cpu_time_s", summary(cpu)},
                          {"split_s",
                           {{"gemm", summary(gemm)},
                            {"comm", summary(red)},
                            {"optimizer", summary(opt)},
                            {"other", summary(other)}}},
                          {"split_cpu_s",
                           {{"gemm", summary(gemm_cpu)},
                            {"comm", summary(red_cpu)},
                            {"optimizer", summary(opt_cpu)},
                            {"other", summary(other_cpu)}}},
                          {"comm_wait_s", summary(wait)},
                          {"comm_without_wait_s", summary(own)},
                          {"all_reduce_verified", ok == 1}};
      std::printf("%s\n", j.dump(2).c_str());
    }
    rc = ok == 1 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_step: %s\n", e.what());
    rc = 2;
  }
  mcr::finalize();
  return rc;
}
