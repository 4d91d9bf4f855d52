#include "mcr/codesign/dtype.hpp"

#include <fmt/core.h>

#include <array>
#include <utility>

#include "mcr/errors.hpp"

namespace mcr::codesign {
namespace {
// One vocabulary across mcr: both print fp64, fp32, fp16, bf16 and i8, and each accepts the
// other's aliases (f32, float32, int8, double, ...; src/comm/core/types.cpp), so one --dtype value
// means the same in every command.
constexpr std::array<std::pair<std::string_view, DType>, 19> kNames{{
    {"fp64", DType::fp64},     {"fp32", DType::fp32},    {"tf32", DType::tf32},
    {"fp16", DType::fp16},     {"bf16", DType::bf16},    {"fp8", DType::fp8},
    {"int8", DType::int8},     {"float64", DType::fp64}, {"float32", DType::fp32},
    {"float", DType::fp32},    {"float16", DType::fp16}, {"half", DType::fp16},
    {"bfloat16", DType::bf16}, {"float8", DType::fp8},   {"f64", DType::fp64},
    {"double", DType::fp64},   {"f32", DType::fp32},     {"f16", DType::fp16},
    {"i8", DType::int8},
}};
}  // namespace

DType parse_dtype(std::string_view name) {
  for (const auto& [text, dtype] : kNames) {
    if (text == name) return dtype;
  }
  throw InvalidArgument(fmt::format(
      "dtype '{}' is not known: use one of fp64, fp32, tf32, fp16, bf16, fp8, i8", name));
}

std::string to_string(DType dtype) {
  switch (dtype) {
    case DType::fp64:
      return "fp64";
    case DType::fp32:
      return "fp32";
    case DType::tf32:
      return "tf32";
    case DType::fp16:
      return "fp16";
    case DType::bf16:
      return "bf16";
    case DType::fp8:
      return "fp8";
    case DType::int8:
      return "i8";
  }
  return "unknown";
}

int dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::fp64:
      return 8;
    case DType::fp32:
    case DType::tf32:
      return 4;  // tf32 is a compute mode: operands are stored as fp32
    case DType::fp16:
    case DType::bf16:
      return 2;
    case DType::fp8:
    case DType::int8:
      return 1;
  }
  return 4;
}

int dtype_output_bytes(DType dtype) {
  switch (dtype) {
    case DType::fp8:
      return dtype_bytes(DType::bf16);
    case DType::int8:
      return 4;
    default:
      return dtype_bytes(dtype);
  }
}

}  // namespace mcr::codesign
