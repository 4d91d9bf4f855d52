#include "core/local_reduce.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace mcr::detail {
namespace {

// Half and BFloat16 combine through float and round back, as NCCL and Gloo do.
template <class T>
struct Arith {
  using Compute = T;
  static Compute load(T v) { return v; }
  static T store(Compute v) { return v; }
};
template <>
struct Arith<Half> {
  using Compute = float;
  static float load(Half v) { return static_cast<float>(v); }
  static Half store(float v) { return Half(v); }
};
template <>
struct Arith<BFloat16> {
  using Compute = float;
  static float load(BFloat16 v) { return static_cast<float>(v); }
  static BFloat16 store(float v) { return BFloat16(v); }
};

// min and max alike in both orders: a library combines a rank's own buffer (inout) with a peer's
// (in), so that std::min's "the first unless the second is less" gave an all-reduce of NaN and 1
// NaN on one rank and 1 on the other. A NaN in either wins, as in torch.minimum/maximum; of -0 and
// +0, min is -0 and max +0.
template <bool Least, class C>
C extreme(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    if (a == b) return std::signbit(a) == Least ? a : b;
  }
  return Least ? std::min(a, b) : std::max(a, b);
}

template <class T, ReduceOp Op>
void combine(void* inout_v, const void* in_v, std::size_t count) {
  auto* inout = static_cast<T*>(inout_v);
  const auto* in = static_cast<const T*>(in_v);
  using A = Arith<T>;
  for (std::size_t i = 0; i < count; ++i) {
    auto a = A::load(inout[i]);
    auto b = A::load(in[i]);
    if constexpr (Op == ReduceOp::sum || Op == ReduceOp::avg) {
      inout[i] = A::store(static_cast<typename A::Compute>(a + b));
    } else if constexpr (Op == ReduceOp::prod) {
      inout[i] = A::store(static_cast<typename A::Compute>(a * b));
    } else if constexpr (Op == ReduceOp::min || Op == ReduceOp::max) {
      inout[i] = A::store(extreme<Op == ReduceOp::min>(a, b));
    } else if constexpr (std::is_integral_v<T>) {
      if constexpr (Op == ReduceOp::band) inout[i] = static_cast<T>(a & b);
      if constexpr (Op == ReduceOp::bor) inout[i] = static_cast<T>(a | b);
      if constexpr (Op == ReduceOp::bxor) inout[i] = static_cast<T>(a ^ b);
    }
  }
}

template <class T>
ReduceFn pick(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return &combine<T, ReduceOp::sum>;
    case ReduceOp::avg:
      return &combine<T, ReduceOp::avg>;
    case ReduceOp::prod:
      return &combine<T, ReduceOp::prod>;
    case ReduceOp::min:
      return &combine<T, ReduceOp::min>;
    case ReduceOp::max:
      return &combine<T, ReduceOp::max>;
    case ReduceOp::band:
      return std::is_integral_v<T> ? &combine<T, ReduceOp::band> : nullptr;
    case ReduceOp::bor:
      return std::is_integral_v<T> ? &combine<T, ReduceOp::bor> : nullptr;
    case ReduceOp::bxor:
      return std::is_integral_v<T> ? &combine<T, ReduceOp::bxor> : nullptr;
  }
  return nullptr;
}

template <class T>
void divide(void* data, std::size_t count, int divisor) {
  auto* p = static_cast<T*>(data);
  using A = Arith<T>;
  for (std::size_t i = 0; i < count; ++i) {
    p[i] = A::store(static_cast<typename A::Compute>(A::load(p[i]) / divisor));
  }
}

}  // namespace

ReduceFn reduce_function(ReduceOp op, DType dtype) noexcept {
  switch (dtype) {
    case DType::f32:
      return pick<float>(op);
    case DType::f64:
      return pick<double>(op);
    case DType::f16:
      return pick<Half>(op);
    case DType::bf16:
      return pick<BFloat16>(op);
    case DType::i8:
      return pick<std::int8_t>(op);
    case DType::u8:
      return pick<std::uint8_t>(op);
    case DType::i32:
      return pick<std::int32_t>(op);
    case DType::i64:
      return pick<std::int64_t>(op);
  }
  return nullptr;
}

void local_reduce(ReduceOp op, DType dtype, void* inout, const void* in,
                  std::size_t count) noexcept {
  if (auto fn = reduce_function(op, dtype)) fn(inout, in, count);
}

void divide_in_place(DType dtype, void* data, std::size_t count, int divisor) noexcept {
  switch (dtype) {
    case DType::f32:
      return divide<float>(data, count, divisor);
    case DType::f64:
      return divide<double>(data, count, divisor);
    case DType::f16:
      return divide<Half>(data, count, divisor);
    case DType::bf16:
      return divide<BFloat16>(data, count, divisor);
    default:
      return;  // avg is rejected for integer types before any backend runs
  }
}

}  // namespace mcr::detail
