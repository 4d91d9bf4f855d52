// Element types the co-design analyser reasons about. The element size decides how many elements
// make up one Tensor Core alignment unit (16 B, 128 B), so it is part of every prediction.
#pragma once

#include <string>
#include <string_view>

namespace mcr::codesign {

enum class DType { fp64, fp32, tf32, fp16, bf16, fp8, int8 };

/// Parses "fp32", "tf32", "fp16", "bf16", "fp8", "i8", "fp64" (also "float32", "float16",
/// "bfloat16", "half", "float", "int8", and the runtime's "f32", "f16", "f64"). Throws
/// mcr::InvalidArgument naming the value and the accepted names.
DType parse_dtype(std::string_view name);

/// Canonical lower-case name ("bf16").
std::string to_string(DType dtype);

/// Bytes per element in memory (tf32 is stored as fp32: 4).
int dtype_bytes(DType dtype);

/// Bytes per element of a GEMM's output C for inputs of `dtype`. Narrow inputs widen: an fp8
/// GEMM writes bf16 (as Transformer Engine and cuBLASLt's fp8 path do) and an int8 GEMM
/// accumulates into and writes int32; every other type writes its own width.
int dtype_output_bytes(DType dtype);

}  // namespace mcr::codesign
