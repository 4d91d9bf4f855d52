#include "values.hpp"

#include <algorithm>

namespace mcr::test {
namespace {

// 64-bit mixing (splitmix64 finaliser): bit patterns for the bitwise reductions.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::int64_t positive_mod(std::int64_t a, std::int64_t m) {
  return ((a % m) + m) % m;
}

// Values of data_value lie in [-(modulus / 2), modulus / 2] (unsigned: [0, modulus)), exact in the
// type, with room left for sentinel_value outside that range.
std::int64_t data_modulus(DType t) {
  switch (t) {
    case DType::i8:
      return 127;
    case DType::u8:
    case DType::bf16:
      return 251;
    case DType::f16:
      return 2039;
    default:
      return 16777213;  // < 2^24: exact in f32
  }
}

}  // namespace

std::int64_t data_value(DType dtype, int rank, std::size_t index, int salt) {
  const std::int64_t m = data_modulus(dtype);
  const std::int64_t raw = (std::int64_t{rank} + 1) * 7919 + static_cast<std::int64_t>(index) * 7 +
                           std::int64_t{salt} * 104729;
  std::int64_t v = positive_mod(raw, m);
  if (dtype != DType::u8) v -= m / 2;
  if (dtype == DType::i64 || dtype == DType::f64) v += (std::int64_t{rank} + 1) << 36;
  return v;
}

std::int64_t sentinel_value(DType dtype) {
  switch (dtype) {
    case DType::i8:
      return 127;
    case DType::u8:
      return 255;
    case DType::bf16:
      return 255;
    case DType::f16:
      return 2047;
    case DType::i64:
    case DType::f64:
      return -(std::int64_t{1} << 45) - 1;
    default:
      return 16777215;
  }
}

std::int64_t reduce_operand(ReduceOp op, DType dtype, int rank, std::size_t index, int size,
                            int salt) {
  const auto i = static_cast<std::int64_t>(index);
  switch (op) {
    case ReduceOp::prod: {
      // Products of {1, 2, -1} stay within 2^size in magnitude.
      static constexpr std::int64_t kSigned[] = {1, 2, -1, 1, 2};
      static constexpr std::int64_t kUnsigned[] = {1, 2, 1, 1, 2};
      const auto k = positive_mod(std::int64_t{rank} * 3 + i + salt, 5);
      return dtype == DType::u8 ? kUnsigned[k] : kSigned[k];
    }
    case ReduceOp::band:
    case ReduceOp::bor:
    case ReduceOp::bxor: {
      const std::uint64_t bits =
          mix((static_cast<std::uint64_t>(rank) << 48) ^ (static_cast<std::uint64_t>(salt) << 32) ^
              static_cast<std::uint64_t>(index));
      return static_cast<std::int64_t>(bits);  // Buffer::set keeps the low bits of the type
    }
    default: {
      // sum, min, max, avg: |value| <= 120 / size, so any partial sum stays within +-120 (exact in
      // bf16 and i8; u8 sums stay below 241).
      const std::int64_t amplitude = std::max(1, 120 / std::max(1, size));
      const std::int64_t v =
          positive_mod(std::int64_t{rank} * 13 + i * 5 + std::int64_t{salt} * 3, 2 * amplitude + 1);
      return dtype == DType::u8 ? v : v - amplitude;
    }
  }
}

std::int64_t reduce_reference(ReduceOp op, DType dtype, std::size_t index, int size, int salt) {
  return reduce_prefix(op, dtype, index, size, salt, size);
}

std::int64_t reduce_prefix(ReduceOp op, DType dtype, std::size_t index, int size, int salt,
                           int ranks) {
  // Integer types wrap to their width; truncating a 64-bit result to the width gives the same bits
  // for sum, prod and the bitwise ops. min/max see operands already within the type's range
  // (bitwise patterns are only used with bitwise ops), so no truncation is needed for them.
  auto truncate = [dtype](std::int64_t v) {
    switch (dtype) {
      case DType::i8:
        return static_cast<std::int64_t>(static_cast<std::int8_t>(v));
      case DType::u8:
        return static_cast<std::int64_t>(static_cast<std::uint8_t>(v));
      case DType::i32:
        return static_cast<std::int64_t>(static_cast<std::int32_t>(v));
      default:
        return v;
    }
  };
  std::int64_t acc = truncate(reduce_operand(op, dtype, 0, index, size, salt));
  for (int r = 1; r < ranks; ++r) {
    const std::int64_t v = truncate(reduce_operand(op, dtype, r, index, size, salt));
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        acc += v;
        break;
      case ReduceOp::prod:
        acc *= v;
        break;
      case ReduceOp::min:
        acc = std::min(acc, v);
        break;
      case ReduceOp::max:
        acc = std::max(acc, v);
        break;
      case ReduceOp::band:
        acc &= v;
        break;
      case ReduceOp::bor:
        acc |= v;
        break;
      case ReduceOp::bxor:
        acc ^= v;
        break;
    }
    acc = truncate(acc);
  }
  return acc;
}

double expected_avg(DType dtype, std::size_t index, int size, int salt) {
  return static_cast<double>(reduce_reference(ReduceOp::sum, dtype, index, size, salt)) / size;
}

std::size_t gather_v_count(std::size_t base, int rank) {
  return rank % 3 == 1 ? 0 : base + 3 * static_cast<std::size_t>(rank);
}

std::size_t all_to_all_v_count(std::size_t base, int src, int dst, bool symmetric) {
  if (symmetric) {
    return (src + dst) % 3 == 1 ? 0 : base + static_cast<std::size_t>(src + dst);
  }
  return (src + 2 * dst) % 3 == 1 ? 0 : base + static_cast<std::size_t>(3 * src + dst);
}

}  // namespace mcr::test
