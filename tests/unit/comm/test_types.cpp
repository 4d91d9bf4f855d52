#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/local_reduce.hpp"
#include "mcr/codesign/dtype.hpp"
#include "mcr/comm/tensor.hpp"
#include "mcr/comm/types.hpp"
#include "mcr/errors.hpp"

using namespace mcr;

// Bit patterns from IEEE 754-2008 binary16: 1.0 = 0x3c00, -2.0 = 0xc000, 65504 = 0x7bff (max),
// 2^-24 = 0x0001 (smallest subnormal), 2^-14 = 0x0400 (smallest normal).
TEST(Half, KnownBitPatterns) {
  EXPECT_EQ(Half(1.0f).bits, 0x3c00);
  EXPECT_EQ(Half(-2.0f).bits, 0xc000);
  EXPECT_EQ(Half(65504.0f).bits, 0x7bff);
  EXPECT_EQ(Half(std::ldexp(1.0f, -24)).bits, 0x0001);
  EXPECT_EQ(Half(std::ldexp(1.0f, -14)).bits, 0x0400);
  EXPECT_EQ(Half(1e6f).bits, 0x7c00);  // overflow to +inf
  EXPECT_EQ(Half(0.0f).bits, 0x0000);
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Half, RoundsToNearestEven) {
  // 2049 lies halfway between 2048 and 2050 (spacing 2 at 2^11): ties go to the even mantissa,
  // 2048.
  EXPECT_EQ(static_cast<float>(Half(2049.0f)), 2048.0f);
  EXPECT_EQ(static_cast<float>(Half(2051.0f)), 2052.0f);
}

TEST(Half, RoundTripsEveryFiniteValue) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    Half h;
    h.bits = static_cast<std::uint16_t>(b);
    const float f = static_cast<float>(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(Half(f).bits, h.bits) << "bits 0x" << std::hex << b;
  }
}

TEST(BFloat16, KnownValuesAndRounding) {
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(BFloat16(-2.0f).bits, 0xc000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even gives 1.0.
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(static_cast<float>(BFloat16(3.0f)), 3.0f);
}

TEST(Types, NamesRoundTrip) {
  for (DType t : kAllDTypes)
    EXPECT_EQ(parse_dtype(to_string(t)), t);
  for (ReduceOp r : kAllReduceOps)
    EXPECT_EQ(parse_reduce_op(to_string(r)), r);
  for (OpType o : kAllOpTypes)
    EXPECT_EQ(parse_op(to_string(o)), o);
  EXPECT_EQ(parse_op("allreduce"), OpType::all_reduce);
  EXPECT_FALSE(parse_dtype("f8").has_value());
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::i64), 8u);
}

TEST(Types, ReduceOpValidity) {
  EXPECT_FALSE(reduce_op_valid_for(ReduceOp::band, DType::f32));
  EXPECT_TRUE(reduce_op_valid_for(ReduceOp::bxor, DType::u8));
  EXPECT_FALSE(reduce_op_valid_for(ReduceOp::avg, DType::i32));
  EXPECT_TRUE(reduce_op_valid_for(ReduceOp::avg, DType::bf16));
}

TEST(Tensor, SliceChecksBounds) {
  std::vector<float> v(10);
  Tensor t(v);
  EXPECT_EQ(t.slice(4, 6).data(), v.data() + 4);
  EXPECT_THROW(t.slice(5, 6), InvalidArgument);
  try {
    t.slice(11, 0);
    ADD_FAILURE() << "slice(11, 0) of 10 elements was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("offset 11"), std::string::npos);
  }
}

TEST(LocalReduce, EveryOpOnIntegers) {
  std::vector<std::int32_t> a{6, 5, -3, 12}, b{3, 9, 4, 10};
  auto run = [&](ReduceOp op) {
    auto x = a;
    detail::local_reduce(op, DType::i32, x.data(), b.data(), x.size());
    return x;
  };
  EXPECT_EQ(run(ReduceOp::sum), (std::vector<std::int32_t>{9, 14, 1, 22}));
  EXPECT_EQ(run(ReduceOp::prod), (std::vector<std::int32_t>{18, 45, -12, 120}));
  EXPECT_EQ(run(ReduceOp::min), (std::vector<std::int32_t>{3, 5, -3, 10}));
  EXPECT_EQ(run(ReduceOp::max), (std::vector<std::int32_t>{6, 9, 4, 12}));
  EXPECT_EQ(run(ReduceOp::band), (std::vector<std::int32_t>{6 & 3, 5 & 9, -3 & 4, 12 & 10}));
  EXPECT_EQ(run(ReduceOp::bor), (std::vector<std::int32_t>{6 | 3, 5 | 9, -3 | 4, 12 | 10}));
  EXPECT_EQ(run(ReduceOp::bxor), (std::vector<std::int32_t>{6 ^ 3, 5 ^ 9, -3 ^ 4, 12 ^ 10}));
}

// min and max give the same value whichever operand is the rank's own buffer: a NaN in either wins,
// and -0 is the min of -0 and +0, +0 the max. std::min kept its first operand (NaN on one rank, 1
// on the other, from one all-reduce).
TEST(LocalReduce, MinAndMaxAreAlikeInBothOrders) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::pair<float, float> pairs[] = {{nan, 1.0f}, {-0.0f, 0.0f}, {2.0f, -3.0f}};
  for (const DType dtype : {DType::f16, DType::bf16, DType::f32, DType::f64}) {
    for (const ReduceOp op : {ReduceOp::min, ReduceOp::max}) {
      for (const auto& [p, q] : pairs) {
        const auto run = [&](float first, float second) {
          if (dtype == DType::f16) {
            Half x(first), y(second);
            detail::local_reduce(op, dtype, &x, &y, 1);
            return static_cast<float>(x);
          }
          if (dtype == DType::bf16) {
            BFloat16 x(first), y(second);
            detail::local_reduce(op, dtype, &x, &y, 1);
            return static_cast<float>(x);
          }
          if (dtype == DType::f32) {
            float x = first, y = second;
            detail::local_reduce(op, dtype, &x, &y, 1);
            return x;
          }
          double x = first, y = second;
          detail::local_reduce(op, dtype, &x, &y, 1);
          return static_cast<float>(x);
        };
        const float one = run(p, q), other = run(q, p);
        const std::string what = std::string(to_string(dtype)) + " " + std::string(to_string(op)) +
                                 " of " + std::to_string(p) + ", " + std::to_string(q);
        if (std::isnan(p)) {
          EXPECT_TRUE(std::isnan(one) && std::isnan(other)) << what;
          continue;
        }
        EXPECT_EQ(one, other) << what;
        EXPECT_EQ(std::signbit(one), std::signbit(other)) << what;
        if (p == 0.0f) {
          EXPECT_EQ(std::signbit(one), op == ReduceOp::min) << what;
        }
      }
    }
  }
}

TEST(LocalReduce, HalfPrecisionThroughFloat) {
  std::vector<BFloat16> x{BFloat16(1.5f), BFloat16(-4.0f)}, y{BFloat16(2.0f), BFloat16(8.0f)};
  detail::local_reduce(ReduceOp::prod, DType::bf16, x.data(), y.data(), 2);
  EXPECT_EQ(static_cast<float>(x[0]), 3.0f);
  EXPECT_EQ(static_cast<float>(x[1]), -32.0f);
  std::vector<Half> h{Half(6.0f)};
  detail::divide_in_place(DType::f16, h.data(), 1, 4);
  EXPECT_EQ(static_cast<float>(h[0]), 1.5f);
  EXPECT_EQ(detail::reduce_function(ReduceOp::band, DType::f32), nullptr);
}

// One dtype vocabulary: every name the runtime prints for a type the analyser also models parses
// there to the same type of the same size, and the analyser's own names parse in the runtime.
TEST(DtypeVocabulary, RuntimeAndAnalyserNamesMeanTheSameType) {
  const std::pair<DType, codesign::DType> same[] = {{DType::f64, codesign::DType::fp64},
                                                    {DType::f32, codesign::DType::fp32},
                                                    {DType::f16, codesign::DType::fp16},
                                                    {DType::bf16, codesign::DType::bf16},
                                                    {DType::i8, codesign::DType::int8}};
  for (const auto& [comm, analyser] : same) {
    EXPECT_EQ(codesign::parse_dtype(to_string(comm)), analyser) << to_string(comm);
    EXPECT_EQ(parse_dtype(codesign::to_string(analyser)), comm) << codesign::to_string(analyser);
    EXPECT_EQ(static_cast<int>(dtype_size(comm)), codesign::dtype_bytes(analyser));
  }
}
