#include "elements.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace mcr::test {

// IEEE binary16 bits of integer `v`, built from its binary expansion (not through float).
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

// bfloat16 is the upper half of a binary32; an exact integer has nothing in the lower half, so no
// rounding is involved (the runtime's rounding is what the tests check, not what they use).
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

void encode_element(DType dtype, std::int64_t value, void* p) {
  auto put = [p](auto x) { std::memcpy(p, &x, sizeof(x)); };
  switch (dtype) {
    case DType::f32:
      return put(static_cast<float>(value));
    case DType::f64:
      return put(static_cast<double>(value));
    case DType::f16:
      return put(f16_bits_of_integer(value));
    case DType::bf16:
      return put(bf16_bits_of_integer(value));
    case DType::i8:
      return put(static_cast<std::int8_t>(value));
    case DType::u8:
      return put(static_cast<std::uint8_t>(value));
    case DType::i32:
      return put(static_cast<std::int32_t>(value));
    case DType::i64:
      return put(value);
  }
}

namespace {

template <class T>
T load(const void* p) {
  T x;
  std::memcpy(&x, p, sizeof(x));
  return x;
}

}  // namespace

double decode_real(DType dtype, const void* p) {
  switch (dtype) {
    case DType::f32:
      return load<float>(p);
    case DType::f64:
      return load<double>(p);
    case DType::f16:
      return f16_value(load<std::uint16_t>(p));
    case DType::bf16:
      return bf16_value(load<std::uint16_t>(p));
    default:
      return static_cast<double>(decode_int(dtype, p));
  }
}

std::int64_t decode_int(DType dtype, const void* p) {
  switch (dtype) {
    case DType::i8:
      return load<std::int8_t>(p);
    case DType::u8:
      return load<std::uint8_t>(p);
    case DType::i32:
      return load<std::int32_t>(p);
    case DType::i64:
      return load<std::int64_t>(p);
    default:
      return static_cast<std::int64_t>(decode_real(dtype, p));
  }
}

namespace {

// What the guard after every buffer holds: a byte no element pattern produces in a whole run.
constexpr std::byte kGuardByte{0xa5};

}  // namespace

Buffer::Buffer(DType dtype, std::size_t count)
    : dtype_(dtype), count_(count), storage_((count * dtype_size(dtype) + kGuardBytes + 7) / 8) {
  std::memset(static_cast<std::byte*>(data()) + count_ * dtype_size(dtype_),
              std::to_integer<int>(kGuardByte), kGuardBytes);
}

void* Buffer::at(std::size_t index) const {
  return const_cast<std::byte*>(static_cast<const std::byte*>(data())) + index * dtype_size(dtype_);
}

Tensor Buffer::slice(std::size_t offset, std::size_t n) {
  if (offset + n > count_) {
    throw std::logic_error(
        fmt::format("test bug: slice [{}, {}) of {}", offset, offset + n, count_));
  }
  return {at(offset), n, dtype_};
}

void Buffer::set(std::size_t index, std::int64_t value) {
  encode_element(dtype_, value, at(index));
}

double Buffer::get_real(std::size_t index) const {
  return decode_real(dtype_, at(index));
}

std::int64_t Buffer::get_int(std::size_t index) const {
  return decode_int(dtype_, at(index));
}

std::string Buffer::guard_damage() const {
  const auto* guard = static_cast<const std::byte*>(at(count_));
  for (std::size_t i = 0; i < kGuardBytes; ++i) {
    if (guard[i] != kGuardByte) {
      return fmt::format("written past its end: guard byte {} after element {} changed", i, count_);
    }
  }
  return {};
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
