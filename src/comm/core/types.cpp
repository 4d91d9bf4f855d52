#include <array>
#include <cmath>

#include "mcr/comm/tensor.hpp"
#include "mcr/comm/types.hpp"
#include "mcr/errors.hpp"

#include <fmt/format.h>

namespace mcr {

std::string_view to_string(DType t) noexcept {
  static constexpr std::array<std::string_view, 8> names{"fp32", "fp64", "fp16", "bf16",
                                                         "i8",   "u8",   "i32",  "i64"};
  return names[static_cast<std::size_t>(t)];
}

std::optional<DType> parse_dtype(std::string_view n) noexcept {
  struct Alias {
    std::string_view name;
    DType type;
  };
  static constexpr Alias aliases[] = {
      {"f32", DType::f32},     {"float32", DType::f32},   {"float", DType::f32},
      {"fp32", DType::f32},    {"f64", DType::f64},       {"float64", DType::f64},
      {"double", DType::f64},  {"fp64", DType::f64},      {"f16", DType::f16},
      {"float16", DType::f16}, {"half", DType::f16},      {"fp16", DType::f16},
      {"bf16", DType::bf16},   {"bfloat16", DType::bf16}, {"i8", DType::i8},
      {"int8", DType::i8},     {"u8", DType::u8},         {"uint8", DType::u8},
      {"i32", DType::i32},     {"int32", DType::i32},     {"int", DType::i32},
      {"i64", DType::i64},     {"int64", DType::i64},     {"long", DType::i64}};
  for (const auto& a : aliases) {
    if (a.name == n) return a.type;
  }
  return std::nullopt;
}

std::string_view to_string(ReduceOp op) noexcept {
  static constexpr std::array<std::string_view, 8> names{"sum", "prod", "min", "max",
                                                         "avg", "band", "bor", "bxor"};
  return names[static_cast<std::size_t>(op)];
}

std::optional<ReduceOp> parse_reduce_op(std::string_view n) noexcept {
  for (ReduceOp op : kAllReduceOps) {
    if (to_string(op) == n) return op;
  }
  if (n == "product") return ReduceOp::prod;
  if (n == "mean") return ReduceOp::avg;
  return std::nullopt;
}

std::string_view to_string(OpType op) noexcept {
  static constexpr std::array<std::string_view, kNumOpTypes> names{
      "send",       "recv",         "broadcast", "reduce",  "all_reduce",
      "all_gather", "all_gather_v", "gather",    "scatter", "reduce_scatter",
      "all_to_all", "all_to_all_v", "barrier"};
  return names[static_cast<std::size_t>(op)];
}

std::optional<OpType> parse_op(std::string_view n) noexcept {
  for (OpType op : kAllOpTypes) {
    if (to_string(op) == n) return op;
  }
  // Accepted spellings from MPI, NCCL and torch.distributed.
  if (n == "allreduce") return OpType::all_reduce;
  if (n == "allgather") return OpType::all_gather;
  if (n == "allgatherv") return OpType::all_gather_v;
  if (n == "reducescatter") return OpType::reduce_scatter;
  if (n == "alltoall") return OpType::all_to_all;
  if (n == "alltoallv") return OpType::all_to_all_v;
  if (n == "bcast") return OpType::broadcast;
  return std::nullopt;
}

std::string_view to_string(Device::Kind k) noexcept {
  return k == Device::Kind::cpu ? "cpu" : "cuda";
}

std::string to_string(Device d) {
  return d.is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", d.index);
}

// binary16 conversion, round-to-nearest-even, with subnormals, infinities and NaN.
Half::Half(float f) noexcept {
  const auto x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) {  // NaN
    bits = static_cast<std::uint16_t>(sign | 0x7e00u);
    return;
  }
  if (abs >= 0x477ff000u) {  // rounds to >= 65520: overflow to infinity
    bits = static_cast<std::uint16_t>(sign | 0x7c00u);
    return;
  }
  if (abs < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    // Scale into the subnormal grid (units of 2^-24) and round to nearest even via float addition.
    const float scaled = std::bit_cast<float>(abs) + 0.5f;  // 0.5 = 2^-1: forces rounding at 2^-24
    bits = static_cast<std::uint16_t>(sign | (std::bit_cast<std::uint32_t>(scaled) - 0x3f000000u));
    return;
  }
  std::uint32_t mant_odd = (abs >> 13) & 1u;
  std::uint32_t v = abs + 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round
  bits = static_cast<std::uint16_t>(sign | (v >> 13));
}

Half::operator float() const noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exp = (bits >> 10) & 0x1fu;
  const std::uint32_t mant = bits & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    const float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(v) | sign);
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

Tensor Tensor::slice(std::size_t offset, std::size_t count) const {
  if (offset > count_ || count > count_ - offset) {
    throw InvalidArgument(
        fmt::format("Tensor::slice: offset {} + count {} exceeds the tensor's {} elements", offset,
                    count, count_));
  }
  auto* base = static_cast<std::byte*>(data_);
  return Tensor(base ? base + offset * element_size() : nullptr, count, dtype_, device_, stream_);
}

}  // namespace mcr
