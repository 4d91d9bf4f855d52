#include "mcr/codesign/gemm.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "mcr/errors.hpp"

namespace mcr::codesign {

std::string to_string(Pass pass) {
  switch (pass) {
    case Pass::forward:
      return "forward";
    case Pass::dgrad:
      return "dgrad";
    case Pass::wgrad:
      return "wgrad";
  }
  return "unknown";
}

Pass parse_pass(const std::string& name) {
  if (name == "forward" || name == "fwd") return Pass::forward;
  if (name == "dgrad") return Pass::dgrad;
  if (name == "wgrad") return Pass::wgrad;
  throw InvalidArgument(
      fmt::format("pass '{}' is not known: use one of forward, dgrad, wgrad", name));
}

double Gemm::flops() const {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
         static_cast<double>(batch);
}

double Gemm::bytes() const {
  if (role == "attn_flash") {
    // Flash attention keeps the s x keys scores on chip: its memory traffic is Q and O, s rows,
    // and K and V, every row some query reads: max(s, keys) (a sliding window's queries together
    // read every token's), each d + d_v wide per head (and in backward their gradients, split here
    // over the two proxy GEMMs). Grouped-query attention is repeat-KV, as for the BMMs. The proxy's
    // m x n output or s x keys operand never reaches DRAM; counted, every flash GEMM of head dim
    // 128 or less read as memory-bound. The role as the analysis names it: the GEMM benchmark's
    // measured stand-ins ("llama:attn_flash") are plain GEMMs and are priced as such.
    const auto [s, keys, widths] = pass == Pass::forward ? std::tuple{m, n, k}
                                   : pass == Pass::dgrad ? std::tuple{m, k, n}
                                                         : std::tuple{k, n, m};
    return static_cast<double>(s + std::max(s, keys)) * static_cast<double>(widths) *
           dtype_bytes(dtype) * static_cast<double>(batch);
  }
  const double inputs = static_cast<double>(m) * static_cast<double>(k) +
                        static_cast<double>(k) * static_cast<double>(n);
  const double output = static_cast<double>(m) * static_cast<double>(n);
  return (inputs * dtype_bytes(dtype) + output * dtype_output_bytes(dtype)) *
         static_cast<double>(batch);
}

double Gemm::arithmetic_intensity() const {
  return flops() / bytes();
}

void Gemm::validate() const {
  const auto check = [this](const char* field, std::int64_t value) {
    if (value <= 0) {
      throw InvalidArgument(
          fmt::format("GEMM '{}': {} = {} must be a positive integer", role, field, value));
    }
  };
  check("m", m);
  check("n", n);
  check("k", k);
  check("batch", batch);
  // A wrapped product would make a runner allocate too little.
  const auto operand = [this](const char* name, std::int64_t rows, std::int64_t cols) {
    std::int64_t elements = 0;
    if (__builtin_mul_overflow(rows, cols, &elements) ||
        __builtin_mul_overflow(elements, batch, &elements) || elements > kMaxOperandElements) {
      throw InvalidArgument(fmt::format(
          "GEMM '{}' m={} n={} k={} batch={}: operand {} has more than {} elements (its bytes "
          "would not fit in 64 bits)",
          role, m, n, k, batch, name, kMaxOperandElements));
    }
  };
  operand("A (m x k x batch)", m, k);
  operand("B (k x n x batch)", k, n);
  operand("C (m x n x batch)", m, n);
}

bool operator==(const Gemm& a, const Gemm& b) {
  return a.role == b.role && a.m == b.m && a.n == b.n && a.k == b.k && a.batch == b.batch &&
         a.dtype == b.dtype && a.pass == b.pass;
}

}  // namespace mcr::codesign
