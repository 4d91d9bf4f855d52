// Element types, reduction operators, operation kinds and devices shared by the whole runtime.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace mcr {

/// Element type of a tensor. Printed (to_string) as fp32, fp64, fp16, bf16, i8, u8, i32, i64: the
/// same names as the analyser's (mcr/codesign/dtype.hpp).
enum class DType : std::uint8_t { f32, f64, f16, bf16, i8, u8, i32, i64 };
inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                       DType::i8,  DType::u8,  DType::i32, DType::i64};

constexpr std::size_t dtype_size(DType t) noexcept {
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
std::string_view to_string(DType t) noexcept;
/// Parses "fp32", "float32", "f32", "fp16", "half", "bf16", "i64", "int64", ... Returns nullopt if
/// unknown.
std::optional<DType> parse_dtype(std::string_view name) noexcept;
constexpr bool is_integer(DType t) noexcept {
  return t == DType::i8 || t == DType::u8 || t == DType::i32 || t == DType::i64;
}
constexpr bool is_floating(DType t) noexcept {
  return !is_integer(t);
}

/// Reduction operator. Bitwise operators (band, bor, bxor) apply to integer types only; avg to
/// floating types only (an integer average would silently truncate).
enum class ReduceOp : std::uint8_t { sum, prod, min, max, avg, band, bor, bxor };
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min,
                                             ReduceOp::max, ReduceOp::avg,  ReduceOp::band,
                                             ReduceOp::bor, ReduceOp::bxor};
std::string_view to_string(ReduceOp op) noexcept;
std::optional<ReduceOp> parse_reduce_op(std::string_view name) noexcept;
/// Whether `op` is defined for elements of type `t` at all (independent of any backend).
constexpr bool reduce_op_valid_for(ReduceOp op, DType t) noexcept {
  switch (op) {
    case ReduceOp::band:
    case ReduceOp::bor:
    case ReduceOp::bxor:
      return is_integer(t);
    case ReduceOp::avg:
      return is_floating(t);
    default:
      return true;
  }
}

/// Every communication operation. isend/irecv are the asynchronous forms of send/recv.
enum class OpType : std::uint8_t {
  send,
  recv,
  broadcast,
  reduce,
  all_reduce,
  all_gather,
  all_gather_v,
  gather,
  scatter,
  reduce_scatter,
  all_to_all,
  all_to_all_v,
  barrier,
};
inline constexpr int kNumOpTypes = 13;
inline constexpr OpType kAllOpTypes[] = {
    OpType::send,       OpType::recv,           OpType::broadcast,    OpType::reduce,
    OpType::all_reduce, OpType::all_gather,     OpType::all_gather_v, OpType::gather,
    OpType::scatter,    OpType::reduce_scatter, OpType::all_to_all,   OpType::all_to_all_v,
    OpType::barrier};
std::string_view to_string(OpType op) noexcept;
std::optional<OpType> parse_op(std::string_view name) noexcept;
/// send and recv: operations between two ranks, which the other members of a communicator do not
/// take part in (their sequence numbers are not the group's).
constexpr bool is_point_to_point(OpType op) noexcept {
  return op == OpType::send || op == OpType::recv;
}
/// Whether the operation combines values with a ReduceOp.
constexpr bool is_reduction(OpType op) noexcept {
  return op == OpType::reduce || op == OpType::all_reduce || op == OpType::reduce_scatter;
}

/// Where a tensor's memory lives.
struct Device {
  enum class Kind : std::uint8_t { cpu, cuda };
  Kind kind = Kind::cpu;
  int index = 0;

  static constexpr Device cpu() noexcept { return {}; }
  static constexpr Device cuda(int index) noexcept { return {Kind::cuda, index}; }
  constexpr bool is_cpu() const noexcept { return kind == Kind::cpu; }
  constexpr bool is_cuda() const noexcept { return kind == Kind::cuda; }
  friend constexpr bool operator==(Device, Device) noexcept = default;
};
std::string to_string(Device d);
std::string_view to_string(Device::Kind k) noexcept;

/// IEEE-754 binary16, stored as bits. Arithmetic goes through float, as every backend that reduces
/// half precision does.
struct Half {
  std::uint16_t bits = 0;
  Half() = default;
  explicit Half(float f) noexcept;
  explicit operator float() const noexcept;
};

/// bfloat16 (the upper 16 bits of an IEEE-754 binary32), round-to-nearest-even on conversion.
struct BFloat16 {
  std::uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) noexcept {
    auto u = std::bit_cast<std::uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it quiet, never round it to infinity
      bits = static_cast<std::uint16_t>((u >> 16) | 0x40u);
      return;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    bits = static_cast<std::uint16_t>(u >> 16);
  }
  explicit operator float() const noexcept {
    return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
  }
};

/// Maps a C++ element type to its DType (used by Tensor's typed constructors).
template <class T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct dtype_of<Half> {
  static constexpr DType value = DType::f16;
};
template <>
struct dtype_of<BFloat16> {
  static constexpr DType value = DType::bf16;
};
template <>
struct dtype_of<std::int8_t> {
  static constexpr DType value = DType::i8;
};
template <>
struct dtype_of<std::uint8_t> {
  static constexpr DType value = DType::u8;
};
template <>
struct dtype_of<std::int32_t> {
  static constexpr DType value = DType::i32;
};
template <>
struct dtype_of<std::int64_t> {
  static constexpr DType value = DType::i64;
};
template <class T>
inline constexpr DType dtype_of_v = dtype_of<std::remove_cv_t<T>>::value;

}  // namespace mcr
