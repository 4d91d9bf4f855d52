// Host-side: NCCL type/operator mappings, the capability table and the unusable-reason text.
#include <gtest/gtest.h>

#include "backends/nccl/nccl_types.hpp"

namespace mcr::detail::nccl {
namespace {

TEST(NcclTables, EveryDTypeMapsToTheNcclTypeOfTheSameWidthAndKind) {
  // Pairs read from nccl.h (NCCL 2.28): ncclInt8=0, ncclUint8=1, ncclInt32=2, ncclInt64=4,
  // ncclFloat16=6, ncclFloat32=7, ncclFloat64=8, ncclBfloat16=9.
  EXPECT_EQ(to_nccl(DType::i8), 0);
  EXPECT_EQ(to_nccl(DType::u8), 1);
  EXPECT_EQ(to_nccl(DType::i32), 2);
  EXPECT_EQ(to_nccl(DType::i64), 4);
  EXPECT_EQ(to_nccl(DType::f16), 6);
  EXPECT_EQ(to_nccl(DType::f32), 7);
  EXPECT_EQ(to_nccl(DType::f64), 8);
  EXPECT_EQ(to_nccl(DType::bf16), 9);
}

TEST(NcclTables, ReduceOpsMapToBuiltInOperatorsAndBitwiseHasNone) {
  // nccl.h: ncclSum=0, ncclProd=1, ncclMax=2, ncclMin=3, ncclAvg=4.
  EXPECT_EQ(to_nccl(ReduceOp::sum), 0);
  EXPECT_EQ(to_nccl(ReduceOp::prod), 1);
  EXPECT_EQ(to_nccl(ReduceOp::max), 2);
  EXPECT_EQ(to_nccl(ReduceOp::min), 3);
  EXPECT_EQ(to_nccl(ReduceOp::avg), 4);
  EXPECT_FALSE(to_nccl(ReduceOp::band));
  EXPECT_FALSE(to_nccl(ReduceOp::bor));
  EXPECT_FALSE(to_nccl(ReduceOp::bxor));
}

TEST(NcclTables, CpuTensorsAreNeverSupported) {
  for (OpType op : kAllOpTypes) {
    for (DType t : kAllDTypes) {
      const Support s = nccl_support(op, t, ReduceOp::sum, Device::Kind::cpu);
      EXPECT_FALSE(s.ok) << to_string(op) << " " << to_string(t);
      EXPECT_NE(s.why.find("device memory"), std::string_view::npos);
    }
  }
}

TEST(NcclTables, CapabilityCountsOnDeviceMatchTheRules) {
  // Hand count: a reduction supports, per floating type (4), sum/prod/min/max/avg = 5 ops -> 20,
  // per integer type (4), sum/prod/min/max = 4 -> 16; 36 per reduction op, 3 reduction ops -> 108.
  // The 10 other ops ignore the reduce op: 8 dtypes x 8 reduce values -> 64 each -> 640.
  int supported = 0;
  int reductions = 0;
  for (OpType op : kAllOpTypes) {
    for (DType t : kAllDTypes) {
      for (ReduceOp r : kAllReduceOps) {
        if (nccl_support(op, t, r, Device::Kind::cuda).ok) {
          ++supported;
          if (is_reduction(op)) ++reductions;
        }
      }
    }
  }
  EXPECT_EQ(reductions, 108);
  EXPECT_EQ(supported, 108 + 640);
}

TEST(NcclTables, RefusalsSayWhy) {
  const Support bitwise =
      nccl_support(OpType::all_reduce, DType::i32, ReduceOp::bxor, Device::Kind::cuda);
  EXPECT_FALSE(bitwise.ok);
  EXPECT_NE(bitwise.why.find("bitwise"), std::string_view::npos);
  const Support int_avg =
      nccl_support(OpType::reduce, DType::i64, ReduceOp::avg, Device::Kind::cuda);
  EXPECT_FALSE(int_avg.ok);
  EXPECT_NE(int_avg.why.find("floating"), std::string_view::npos);
  EXPECT_TRUE(
      nccl_support(OpType::reduce_scatter, DType::bf16, ReduceOp::avg, Device::Kind::cuda).ok);
}

TEST(NcclTables, HowEachOperationRuns) {
  const auto how = [](OpType op) {
    return nccl_support(op, DType::f32, ReduceOp::sum, Device::Kind::cuda).how;
  };
  for (OpType op : {OpType::send, OpType::recv, OpType::broadcast, OpType::reduce,
                    OpType::all_reduce, OpType::all_gather, OpType::reduce_scatter}) {
    EXPECT_EQ(how(op), "native") << to_string(op);
  }
  for (OpType op : {OpType::all_to_all, OpType::all_to_all_v, OpType::gather, OpType::scatter,
                    OpType::all_gather_v}) {
    EXPECT_EQ(how(op), "grouped send/recv") << to_string(op);
  }
  EXPECT_EQ(how(OpType::barrier), "1-element all_reduce");
}

TEST(NcclTables, UnusableReasonNamesTheCause) {
  EXPECT_EQ(unusable_reason_for("cudaErrorNoDevice", "no CUDA-capable device is detected", 0, 1),
            "no usable CUDA device: cudaGetDeviceCount returned cudaErrorNoDevice (no "
            "CUDA-capable device is detected)");
  EXPECT_EQ(unusable_reason_for({}, {}, 0, 1),
            "no CUDA device: cudaGetDeviceCount found 0 devices");
  const std::string shared = unusable_reason_for({}, {}, 1, 2);
  EXPECT_NE(shared.find("2 ranks on this node share 1 CUDA device(s)"), std::string::npos);
  EXPECT_EQ(unusable_reason_for({}, {}, 8, 8), "");
  EXPECT_EQ(unusable_reason_for({}, {}, 4, 1), "");
}

}  // namespace
}  // namespace mcr::detail::nccl
