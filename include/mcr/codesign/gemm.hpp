// One GEMM or batched GEMM as the hardware sees it: C[M x N] = A[M x K] * B[K x N], `batch` times.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "mcr/codesign/dtype.hpp"

namespace mcr::codesign {

/// Which pass of training a GEMM belongs to. For a forward GEMM Y[MxN] = X[MxK] W[KxN]:
/// dgrad is dX[MxK] = dY[MxN] W^T (reduction N), wgrad is dW[KxN] = X^T dY (reduction M).
enum class Pass { forward, dgrad, wgrad };

std::string to_string(Pass pass);
Pass parse_pass(const std::string& name);

/// The most elements one GEMM operand, or one microbatch's activations, may have: their bytes (at
/// most 8 per element) must fit in 64 bits, since the runners and memory counts size buffers with
/// these products.
inline constexpr std::int64_t kMaxOperandElements = std::numeric_limits<std::int64_t>::max() / 8;

struct Gemm {
  std::string role;  ///< qkv, attn_score, attn_over_value, attn_proj, mlp_up, mlp_gate, mlp_down,
                     ///< logits, moe_up, moe_gate, moe_down, moe_router, or a user label
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t batch = 1;  ///< independent GEMMs of the same shape in one launch (BMM)
  DType dtype = DType::bf16;
  Pass pass = Pass::forward;

  /// 2*m*n*k*batch: one multiply and one add per multiply-accumulate.
  double flops() const;
  /// Minimum DRAM traffic: read A and B once, write C once (batch times), in bytes. C is
  /// dtype_output_bytes wide (bf16 for fp8 inputs).
  double bytes() const;
  /// flops() / bytes(), in FLOP per byte.
  double arithmetic_intensity() const;

  /// Throws mcr::InvalidArgument when a dimension or the batch is not positive.
  void validate() const;
};

bool operator==(const Gemm& a, const Gemm& b);

}  // namespace mcr::codesign
