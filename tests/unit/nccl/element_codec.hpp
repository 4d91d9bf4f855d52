// Host-side encoding of test values as elements of any mcr dtype, shared by the device tests.
// Written independently of the runtime's own conversions only where they are the thing under test;
// here the f16/bf16 constructors are trusted (they have their own exhaustive unit test).
#pragma once

#include <cstdint>
#include <cstring>

#include "mcr/types.hpp"

namespace mcr_test {

inline void encode(mcr::DType t, double v, std::uint8_t* p) {
  using mcr::DType;
  switch (t) {
    case DType::f32: {
      const float x = static_cast<float>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::f64:
      std::memcpy(p, &v, 8);
      break;
    case DType::f16: {
      const mcr::Half h(static_cast<float>(v));
      std::memcpy(p, &h.bits, 2);
      break;
    }
    case DType::bf16: {
      const mcr::BFloat16 b(static_cast<float>(v));
      std::memcpy(p, &b.bits, 2);
      break;
    }
    case DType::i8: {
      const auto x = static_cast<std::int8_t>(v);
      std::memcpy(p, &x, 1);
      break;
    }
    case DType::u8: {
      const auto x = static_cast<std::uint8_t>(v);
      std::memcpy(p, &x, 1);
      break;
    }
    case DType::i32: {
      const auto x = static_cast<std::int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::i64: {
      const auto x = static_cast<std::int64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
  }
}

inline double decode(mcr::DType t, const std::uint8_t* p) {
  using mcr::DType;
  switch (t) {
    case DType::f32: {
      float x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case DType::f64: {
      double x;
      std::memcpy(&x, p, 8);
      return x;
    }
    case DType::f16: {
      mcr::Half h;
      std::memcpy(&h.bits, p, 2);
      return static_cast<float>(h);
    }
    case DType::bf16: {
      mcr::BFloat16 b;
      std::memcpy(&b.bits, p, 2);
      return static_cast<float>(b);
    }
    case DType::i8: {
      std::int8_t x;
      std::memcpy(&x, p, 1);
      return x;
    }
    case DType::u8: {
      std::uint8_t x;
      std::memcpy(&x, p, 1);
      return x;
    }
    case DType::i32: {
      std::int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case DType::i64: {
      std::int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
  }
  return 0;
}

}  // namespace mcr_test
