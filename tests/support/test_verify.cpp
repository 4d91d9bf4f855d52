// Checks of the verification library itself: the hand-written encoders against known IEEE bit
// patterns, the value patterns for exactness in every dtype (every partial result of every
// reduction included), the checker's report, the guards and the case list.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <stdexcept>
#include <string>

#include "verify/conformance.hpp"
#include "verify/elements.hpp"
#include "verify/values.hpp"

namespace mcr::test {
namespace {

TEST(Encoders, KnownBitPatterns) {
  EXPECT_EQ(f16_bits_of_integer(0), 0x0000);
  EXPECT_EQ(f16_bits_of_integer(1), 0x3c00);
  EXPECT_EQ(f16_bits_of_integer(-2), 0xc000);
  EXPECT_EQ(f16_bits_of_integer(1019), 0x63f6);
  EXPECT_EQ(f16_bits_of_integer(2048), 0x6800);
  EXPECT_EQ(f16_bits_of_integer(65504), 0x7bff);  // the largest finite f16
  EXPECT_THROW(f16_bits_of_integer(2049), std::logic_error);
  EXPECT_THROW(f16_bits_of_integer(65536), std::logic_error);
  EXPECT_EQ(bf16_bits_of_integer(1), 0x3f80);
  EXPECT_EQ(bf16_bits_of_integer(-125), 0xc2fa);
  EXPECT_EQ(bf16_bits_of_integer(256), 0x4380);
  EXPECT_THROW(bf16_bits_of_integer(257), std::logic_error);
  EXPECT_EQ(f16_value(0x0001), 0x1p-24);  // smallest subnormal
  EXPECT_TRUE(std::isinf(f16_value(0x7c00)));
  EXPECT_EQ(bf16_value(0xc2fa), -125.0);
}

TEST(Encoders, EveryExactIntegerRoundTrips) {
  for (std::int64_t v = -2048; v <= 2048; ++v) {
    EXPECT_EQ(f16_value(f16_bits_of_integer(v)), static_cast<double>(v)) << v;
  }
  for (std::int64_t v = -256; v <= 256; ++v) {
    EXPECT_EQ(bf16_value(bf16_bits_of_integer(v)), static_cast<double>(v)) << v;
  }
}

// Every data value, and every partial result of every reduction of up to four ranks, must be
// exact in the dtype: Buffer::set throws for f16/bf16 values that are not, and for the other types
// the value must survive the round trip (integer types after wrapping to their width).
TEST(Patterns, ExactInEveryDtype) {
  for (DType t : kAllDTypes) {
    Buffer b(t, 1);
    for (int rank = 0; rank < 4; ++rank) {
      for (std::size_t i = 0; i < 3000; i += 7) {
        const std::int64_t v = data_value(t, rank, i, 11);
        b.set(0, v);
        EXPECT_EQ(b.get_int(0), v) << to_string(t) << " rank " << rank << " index " << i;
        EXPECT_NE(v, sentinel_value(t)) << to_string(t);
      }
    }
    for (ReduceOp op : kAllReduceOps) {
      if (!reduce_op_valid_for(op, t)) continue;
      for (int size = 1; size <= 4; ++size) {
        for (std::size_t i = 0; i < 200; ++i) {
          for (int ranks = 1; ranks <= size; ++ranks) {
            ASSERT_NO_THROW(b.set(0, reduce_prefix(op, t, i, size, 5, ranks)))
                << to_string(t) << " " << to_string(op) << " size " << size << " ranks " << ranks;
          }
          if (is_floating(t) && op != ReduceOp::avg) {
            EXPECT_EQ(b.get_real(0), static_cast<double>(reduce_reference(op, t, i, size, 5)));
          }
        }
      }
    }
  }
}

TEST(Checker, ReportsIndexExpectedAndGot) {
  Buffer expected(DType::i32, 10);
  fill(expected, 0, 10, [](std::size_t i) { return static_cast<std::int64_t>(i); });
  Buffer got = expected;
  EXPECT_EQ(compare_exact(got, 0, expected), "");
  got.set(3, 42);
  const std::string report = compare_exact(got, 0, expected);
  EXPECT_NE(report.find("1 of 10 elements wrong"), std::string::npos) << report;
  EXPECT_NE(report.find("[3] expected 3 got 42"), std::string::npos) << report;
  const std::vector<double> avg{1.5, 2.5};
  Buffer h(DType::f16, 2);
  h.set(0, 1);
  EXPECT_NE(compare_close(h, 0, avg, 2.0).find("[0] expected 1.5 got 1"), std::string::npos);
}

TEST(Checker, GuardShowsAWritePastTheEnd) {
  Buffer b(DType::f64, 3);
  EXPECT_EQ(b.guard_damage(), "");
  static_cast<unsigned char*>(b.data())[3 * 8 + 1] = 0;
  EXPECT_NE(b.guard_damage().find("guard byte 1 after element 3"), std::string::npos);
}

TEST(Cases, PreparedCaseSeesItsOwnInputUnchangedAndItsOutputUnwritten) {
  OpCase c{OpType::all_reduce, DType::bf16, ReduceOp::max, 7, false, false, 0, "", 3};
  PreparedCase p(c, 0, 2);
  const std::string report = p.verify();  // nothing ran: the output still holds sentinels
  EXPECT_NE(report.find("max result: 7 of 7 elements wrong"), std::string::npos) << report;
  EXPECT_EQ(report.find("input"), std::string::npos) << report;
}

TEST(Cases, ListIsDeterministicWithDistinctSalts) {
  MatrixOptions options;
  options.large_count = 4099;
  const auto a = conformance_cases(3, options);
  const auto b = conformance_cases(3, options);
  ASSERT_EQ(a.size(), b.size());
  std::set<int> salts;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(describe(a[i]), describe(b[i]));
    salts.insert(a[i].salt);
  }
  EXPECT_EQ(salts.size(), a.size());
  std::set<std::string> combos;
  for (const auto& c : a)
    combos.insert(combination(c));
  // 8 data-movement ops x 8 dtypes, barrier once, 3 reductions x (4 float x 5 + 4 integer x 7).
  EXPECT_EQ(combos.size(), 8u * 8u + 1u + 3u * (4u * 5u + 4u * 7u));
}

}  // namespace
}  // namespace mcr::test
