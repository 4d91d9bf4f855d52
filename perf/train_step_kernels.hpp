// Kernels of the C++ training step (train_step.cpp): a timed CBLAS GEMM wrapper and plain loops for
// the memory-bound work, written once over whole tensors as a framework's fused kernels would be,
// so that each moves about the bytes the planner charges it for. fp32, row-major.
#pragma once

#include <cblas.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <span>
#include <vector>

namespace ts {

using Vec = std::vector<float>;

/// Seconds inside GEMMs, the gradient all_reduce and the optimizer, by the wall clock and by the
/// process's CPU time (which leaves out time other jobs held the core), and the GEMM FLOPs.
struct Clock {
  double gemm = 0, comm = 0, opt = 0, gemm_cpu = 0, comm_cpu = 0, opt_cpu = 0, flops = 0;
};

inline double wall_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
inline double cpu_now() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

inline std::uint64_t next(std::uint64_t& x) {  // splitmix64
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline void fill_random(Vec& x, std::uint64_t seed, float scale) {
  for (auto& v : x)
    v = scale * (static_cast<float>(next(seed) >> 40) / 16777216.0f - 0.5f);
}

constexpr float kDropKeep = 0.9f;  // dropout probability 0.1, as GPT-2 and Megatron use
inline void dropout_mask(std::span<std::uint8_t> mask, std::uint64_t seed) {
  for (auto& m : mask)
    m = (next(seed) >> 40) % 10 != 0 ? 1 : 0;
}

/// C[M x N] = alpha op(A) op(B), row-major; leading dimensions default to the packed ones. Timed.
inline void gemm(Clock& clock, bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K,
                 const float* A, const float* B, float* C, std::size_t lda = 0, std::size_t ldb = 0,
                 std::size_t ldc = 0, float alpha = 1.0f) {
  if (lda == 0) lda = ta ? M : K;
  if (ldb == 0) ldb = tb ? K : N;
  if (ldc == 0) ldc = N;
  const double t0 = wall_now(), c0 = cpu_now();
  const auto i = [](std::size_t v) { return static_cast<blasint>(v); };
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, i(M),
              i(N), i(K), alpha, A, i(lda), B, i(ldb), 0.0f, C, i(ldc));
  clock.gemm += wall_now() - t0;
  clock.gemm_cpu += cpu_now() - c0;
  clock.flops += 2.0 * static_cast<double>(M * N * K);
}

inline void embed(const std::vector<int>& tok, const float* emb, const float* pos, std::size_t s,
                  std::size_t h, Vec& x) {
  for (std::size_t t = 0; t < tok.size(); ++t) {
    const float* e = emb + static_cast<std::size_t>(tok[t]) * h;
    const float* p = pos + (t % s) * h;
    for (std::size_t j = 0; j < h; ++j)
      x[t * h + j] = e[j] + p[j];
  }
}

/// Scatter-add into the rows of the tokens (zeroed first: the batch is the same every step, so
/// no other row ever holds a gradient) and the position table.
inline void embed_backward(const std::vector<int>& tok, const Vec& dx, std::size_t s, std::size_t h,
                           float* demb, float* dpos) {
  for (int t : tok)
    std::fill_n(demb + static_cast<std::size_t>(t) * h, h, 0.0f);
  std::fill_n(dpos, s * h, 0.0f);
  for (std::size_t t = 0; t < tok.size(); ++t) {
    float* e = demb + static_cast<std::size_t>(tok[t]) * h;
    float* p = dpos + (t % s) * h;
    for (std::size_t j = 0; j < h; ++j)
      e[j] += dx[t * h + j], p[j] += dx[t * h + j];
  }
}

inline void layernorm(const Vec& x, const float* g, const float* b, std::size_t T, std::size_t h,
                      Vec& y, Vec& mu, Vec& rs) {
  for (std::size_t t = 0; t < T; ++t) {
    const float* r = &x[t * h];
    float m = 0, v = 0;
    for (std::size_t j = 0; j < h; ++j)
      m += r[j];
    m /= static_cast<float>(h);
    for (std::size_t j = 0; j < h; ++j)
      v += (r[j] - m) * (r[j] - m);
    const float inv = 1.0f / std::sqrt(v / static_cast<float>(h) + 1e-5f);
    mu[t] = m, rs[t] = inv;
    for (std::size_t j = 0; j < h; ++j)
      y[t * h + j] = (r[j] - m) * inv * g[j] + b[j];
  }
}

/// dx (+)= d LN(x) / dx applied to dy; dg, db receive the parameter gradients.
inline void layernorm_backward(const Vec& dy, const Vec& x, const Vec& mu, const Vec& rs,
                               const float* g, std::size_t T, std::size_t h, Vec& dx, float* dg,
                               float* db, bool accumulate) {
  std::fill_n(dg, h, 0.0f), std::fill_n(db, h, 0.0f);
  const float n = static_cast<float>(h);
  for (std::size_t t = 0; t < T; ++t) {
    const float* d = &dy[t * h];
    const float* r = &x[t * h];
    float s1 = 0, s2 = 0;
    for (std::size_t j = 0; j < h; ++j) {
      const float xh = (r[j] - mu[t]) * rs[t];
      dg[j] += d[j] * xh, db[j] += d[j];
      s1 += d[j] * g[j], s2 += d[j] * g[j] * xh;
    }
    for (std::size_t j = 0; j < h; ++j) {
      const float xh = (r[j] - mu[t]) * rs[t];
      const float v = rs[t] * (d[j] * g[j] - (s1 + xh * s2) / n);
      dx[t * h + j] = accumulate ? dx[t * h + j] + v : v;
    }
  }
}

inline void add_bias(Vec& y, const float* b, std::size_t T, std::size_t n) {
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t j = 0; j < n; ++j)
      y[t * n + j] += b[j];
}

inline void column_sum(const Vec& d, std::size_t T, std::size_t n, float* out) {
  std::fill_n(out, n, 0.0f);
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t j = 0; j < n; ++j)
      out[j] += d[t * n + j];
}

/// Causal softmax of each s x s score matrix in place, then dropout into `drop` with its mask.
inline void softmax_dropout(Vec& p, Vec& drop, std::vector<std::uint8_t>& mask, std::size_t mats,
                            std::size_t s, std::uint64_t seed) {
  for (std::size_t r = 0; r < mats * s; ++r) {
    float* row = &p[r * s];
    const std::size_t last = r % s;  // row i attends to columns 0..i
    float mx = row[0], sum = 0;
    for (std::size_t j = 1; j <= last; ++j)
      mx = std::max(mx, row[j]);
    for (std::size_t j = 0; j < s; ++j) {
      row[j] = j <= last ? std::exp(row[j] - mx) : 0.0f;
      sum += row[j];
    }
    for (std::size_t j = 0; j < s; ++j)
      row[j] /= sum;
  }
  dropout_mask(mask, seed);
  for (std::size_t i = 0; i < p.size(); ++i)
    drop[i] = mask[i] ? p[i] / kDropKeep : 0.0f;
}

/// dp: gradient of the dropped probabilities on entry, of the (scaled) scores on return.
inline void softmax_dropout_backward(Vec& dp, const Vec& p, const std::vector<std::uint8_t>& mask,
                                     std::size_t mats, std::size_t s, float scale) {
  for (std::size_t r = 0; r < mats * s; ++r) {
    float* d = &dp[r * s];
    const float* y = &p[r * s];
    const std::uint8_t* m = &mask[r * s];
    float dot = 0;
    for (std::size_t j = 0; j < s; ++j) {
      d[j] = m[j] ? d[j] / kDropKeep : 0.0f;
      dot += d[j] * y[j];
    }
    for (std::size_t j = 0; j < s; ++j)
      d[j] = scale * y[j] * (d[j] - dot);
  }
}

/// out = res + dropout(y + b): the residual branch of a pre-norm block.
inline void bias_dropout_add(const Vec& y, const float* b, const Vec& res,
                             std::vector<std::uint8_t>& mask, std::size_t T, std::size_t h,
                             Vec& out, std::uint64_t seed) {
  dropout_mask(mask, seed);
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t j = 0; j < h; ++j) {
      const std::size_t i = t * h + j;
      out[i] = res[i] + (mask[i] ? (y[i] + b[j]) / kDropKeep : 0.0f);
    }
  }
}

/// dy = dropout'(dout), and the bias gradient db = column sums of dy.
inline void dropout_backward(const Vec& dout, const std::vector<std::uint8_t>& mask, Vec& dy,
                             float* db, std::size_t T, std::size_t h) {
  for (std::size_t i = 0; i < T * h; ++i)
    dy[i] = mask[i] ? dout[i] / kDropKeep : 0.0f;
  column_sum(dy, T, h, db);
}

// GeLU, tanh form (GPT-2).
inline float gelu(float x) {
  return 0.5f * x * (1.0f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
}
inline float gelu_grad(float x) {
  const float u = 0.7978845608f * (x + 0.044715f * x * x * x);
  const float th = std::tanh(u);
  return 0.5f * (1.0f + th) +
         0.5f * x * (1.0f - th * th) * 0.7978845608f * (1.0f + 3.0f * 0.044715f * x * x);
}

/// u += b (kept for the backward pass), g = gelu(u).
inline void bias_gelu(Vec& u, const float* b, std::size_t T, std::size_t n, Vec& g) {
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t j = 0; j < n; ++j) {
      u[t * n + j] += b[j];
      g[t * n + j] = gelu(u[t * n + j]);
    }
  }
}

/// dg becomes the gradient of the pre-activation; db its column sums.
inline void gelu_backward(Vec& dg, const Vec& u, std::size_t T, std::size_t n, float* db) {
  for (std::size_t i = 0; i < T * n; ++i)
    dg[i] *= gelu_grad(u[i]);
  column_sum(dg, T, n, db);
}

/// Mean cross entropy; the logits become their gradient in place. Returns the loss.
inline float cross_entropy(Vec& z, const std::vector<int>& target, std::size_t T, std::size_t V) {
  double loss = 0;
  for (std::size_t t = 0; t < T; ++t) {
    float* r = &z[t * V];
    const float mx = *std::max_element(r, r + V);
    float sum = 0;
    for (std::size_t j = 0; j < V; ++j)
      sum += (r[j] = std::exp(r[j] - mx));
    const auto y = static_cast<std::size_t>(target[t]);
    loss -= std::log(r[y] / sum);
    for (std::size_t j = 0; j < V; ++j)
      r[j] = r[j] / sum / static_cast<float>(T);
    r[y] -= 1.0f / static_cast<float>(T);
  }
  return static_cast<float>(loss / static_cast<double>(T));
}

/// Adam (Kingma and Ba 2015) with bias correction, over every parameter.
inline void adam(Vec& w, const Vec& g, Vec& m, Vec& v, int step) {
  constexpr float lr = 1e-4f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  const float c1 = 1.0f / (1.0f - std::pow(b1, static_cast<float>(step)));
  const float c2 = 1.0f / (1.0f - std::pow(b2, static_cast<float>(step)));
  for (std::size_t i = 0; i < w.size(); ++i) {
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    w[i] -= lr * (m[i] * c1) / (std::sqrt(v[i] * c2) + eps);
  }
}

/// Checks one reduced bucket independently of mcr: raw MPI sums sampled elements and the bucket's
/// element sum across the ranks before the reduction, and the reduced bucket must agree.
struct BucketCheck {
  static constexpr std::size_t kSamples = 64;
  std::vector<std::size_t> index;
  std::vector<double> expect;  // samples, then the bucket's sum and sum of magnitudes

  static BucketCheck before(std::span<const float> part) {
    BucketCheck c;
    const std::size_t n = std::min(kSamples, part.size());
    for (std::size_t i = 0; i < n; ++i)
      c.index.push_back(i * part.size() / n);
    for (std::size_t i : c.index)
      c.expect.push_back(part[i]);
    double sum = 0, mag = 0;
    for (float x : part)
      sum += x, mag += std::abs(x);
    c.expect.push_back(sum);
    c.expect.push_back(mag);
    MPI_Allreduce(MPI_IN_PLACE, c.expect.data(), static_cast<int>(c.expect.size()), MPI_DOUBLE,
                  MPI_SUM, MPI_COMM_WORLD);
    return c;
  }

  // Two float summands round once: agreement to a few float ulps of the magnitude.
  bool after(std::span<const float> part) const {
    bool ok = true;
    for (std::size_t i = 0; i < index.size(); ++i) {
      const double got = part[index[i]], want = expect[i];
      ok = ok && std::abs(got - want) <= 1e-6 * std::abs(want) + 1e-30;
    }
    double sum = 0;
    for (float x : part)
      sum += x;
    const double want = expect[index.size()], mag = expect[index.size() + 1];
    return ok && std::abs(sum - want) <= 1e-5 * mag + 1e-30;
  }
};

}  // namespace ts
