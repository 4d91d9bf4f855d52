#include "elements.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace mcr::test {
namespace {

std::size_t size_of(DType t) {
  switch (t) {
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::i8:
    case DType::u8:
      return 1;
  }
  return 1;
}

// IEEE binary16 bits of integer `v`, which must be exactly representable (a test-side invariant).
std::uint16_t f16_bits_of_integer(std::int64_t v) {
  if (v == 0) return 0;
  const std::uint16_t sign = v < 0 ? 0x8000 : 0;
  const auto magnitude = static_cast<std::uint64_t>(v < 0 ? -v : v);
  const int exponent = std::bit_width(magnitude) - 1;  // magnitude = 1.m * 2^exponent
  if (exponent > 15) throw std::logic_error(fmt::format("{} overflows f16", v));
  const int shift = exponent - 10;  // f16 keeps 10 fraction bits
  if (shift > 0 && (magnitude & ((std::uint64_t{1} << shift) - 1)) != 0) {
    throw std::logic_error(fmt::format("{} is not exact in f16", v));
  }
  const std::uint64_t fraction =
      (shift >= 0 ? magnitude >> shift : magnitude << -shift) & std::uint64_t{0x3ff};
  return static_cast<std::uint16_t>(sign | ((exponent + 15) << 10) | fraction);
}

double f16_value(std::uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f;
  const int fraction = bits & 0x3ff;
  double magnitude = 0;
  if (exponent == 0) {
    magnitude = std::ldexp(fraction, -24);  // subnormal
  } else if (exponent == 31) {
    magnitude = fraction == 0 ? INFINITY : NAN;
  } else {
    magnitude = std::ldexp(1024 + fraction, exponent - 25);
  }
  return (bits & 0x8000) != 0 ? -magnitude : magnitude;
}

std::uint16_t bf16_bits_of_integer(std::int64_t v) {
  const auto f = static_cast<float>(v);
  const auto bits = std::bit_cast<std::uint32_t>(f);
  if (static_cast<std::int64_t>(f) != v || (bits & 0xffffu) != 0) {
    throw std::logic_error(fmt::format("{} is not exact in bf16", v));
  }
  return static_cast<std::uint16_t>(bits >> 16);
}

double bf16_value(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

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

Buffer::Buffer(DType dtype, std::size_t count)
    : dtype_(dtype),
      count_(count),
      storage_(std::max<std::size_t>(1, (count * size_of(dtype) + 7) / 8)) {}

Tensor Buffer::slice(std::size_t offset, std::size_t n) {
  if (offset + n > count_) {
    throw std::logic_error(
        fmt::format("test bug: slice [{}, {}) of {}", offset, offset + n, count_));
  }
  return {static_cast<std::byte*>(data()) + offset * size_of(dtype_), n, dtype_};
}

void Buffer::set(std::size_t index, std::int64_t value) {
  void* p = static_cast<std::byte*>(data()) + index * size_of(dtype_);
  auto put = [p](auto x) { std::memcpy(p, &x, sizeof(x)); };
  switch (dtype_) {
    case DType::f32:
      put(static_cast<float>(value));
      break;
    case DType::f64:
      put(static_cast<double>(value));
      break;
    case DType::f16:
      put(f16_bits_of_integer(value));
      break;
    case DType::bf16:
      put(bf16_bits_of_integer(value));
      break;
    case DType::i8:
      put(static_cast<std::int8_t>(value));
      break;
    case DType::u8:
      put(static_cast<std::uint8_t>(value));
      break;
    case DType::i32:
      put(static_cast<std::int32_t>(value));
      break;
    case DType::i64:
      put(value);
      break;
  }
}

double Buffer::get_real(std::size_t index) const {
  const void* p = static_cast<const std::byte*>(data()) + index * size_of(dtype_);
  auto get = [p]<class T>(T) {
    T x;
    std::memcpy(&x, p, sizeof(x));
    return x;
  };
  switch (dtype_) {
    case DType::f32:
      return get(float{});
    case DType::f64:
      return get(double{});
    case DType::f16:
      return f16_value(get(std::uint16_t{}));
    case DType::bf16:
      return bf16_value(get(std::uint16_t{}));
    default:
      return static_cast<double>(get_int(index));
  }
}

std::int64_t Buffer::get_int(std::size_t index) const {
  const void* p = static_cast<const std::byte*>(data()) + index * size_of(dtype_);
  auto get = [p]<class T>(T) {
    T x;
    std::memcpy(&x, p, sizeof(x));
    return static_cast<std::int64_t>(x);
  };
  switch (dtype_) {
    case DType::i8:
      return get(std::int8_t{});
    case DType::u8:
      return get(std::uint8_t{});
    case DType::i32:
      return get(std::int32_t{});
    case DType::i64:
      return get(std::int64_t{});
    default:
      return static_cast<std::int64_t>(get_real(index));
  }
}

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
  for (int r = 1; r < size; ++r) {
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

std::string element_text(const Buffer& b, std::size_t index) {
  if (is_integer(b.dtype())) return std::to_string(b.get_int(index));
  return fmt::format("{}", b.get_real(index));
}

namespace {

constexpr int kShownMismatches = 4;

std::string mismatch_summary(std::size_t wrong, std::size_t total, const std::string& examples) {
  return fmt::format("{} of {} elements wrong; {}", wrong, total, examples);
}

}  // namespace

std::string compare_exact(const Buffer& got, std::size_t got_offset, const Buffer& expected) {
  std::size_t wrong = 0;
  std::string examples;
  const bool integer = is_integer(got.dtype());
  for (std::size_t i = 0; i < expected.count(); ++i) {
    const bool equal = integer ? got.get_int(got_offset + i) == expected.get_int(i)
                               : got.get_real(got_offset + i) == expected.get_real(i);
    if (equal) continue;
    if (wrong++ < kShownMismatches) {
      examples += fmt::format("[{}] expected {} got {}; ", i, element_text(expected, i),
                              element_text(got, got_offset + i));
    }
  }
  return wrong == 0 ? std::string() : mismatch_summary(wrong, expected.count(), examples);
}

std::string compare_close(const Buffer& got, std::size_t got_offset,
                          std::span<const double> expected, double ulps) {
  const int fraction_bits = [&] {
    switch (got.dtype()) {
      case DType::f16:
        return 10;
      case DType::bf16:
        return 7;
      case DType::f32:
        return 23;
      default:
        return 52;
    }
  }();
  std::size_t wrong = 0;
  std::string examples;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double g = got.get_real(got_offset + i);
    const double e = expected[i];
    const double unit = std::ldexp(std::max(std::abs(e), 1e-30), -fraction_bits);
    if (std::abs(g - e) <= ulps * unit) continue;
    if (wrong++ < kShownMismatches) {
      examples += fmt::format("[{}] expected {} got {}; ", i, e, g);
    }
  }
  return wrong == 0 ? std::string() : mismatch_summary(wrong, expected.size(), examples);
}

}  // namespace mcr::test
