// Shapes no model can have, or that Megatron cannot shard, are rejected with the rule and the
// value.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "mcr/codesign/model.hpp"
#include "mcr/errors.hpp"

namespace mcr::codesign {
namespace {

std::string error_of(const ModelShape& m) {
  try {
    m.validate();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no error";
}

TEST(Validation, KvHeadsMustDivideHeads) {
  ModelShape m = load_preset("llama-2-7b");
  m.a_kv = 5;
  const std::string e = error_of(m);
  EXPECT_NE(e.find("a_kv (model.kv_heads) = 5 must divide a (model.heads) = 32"), std::string::npos)
      << e;
}

// b·s·h fits, but b·s·top_k rows of h did not: the product wrapped to 0 and the expert GEMMs
// divided by it (SIGFPE) instead of refusing the shape.
TEST(Validation, RoutedTokensAreBounded) {
  ModelShape m = load_preset("gpt3-125m");
  m.h = 64;
  m.a = 1;
  m.a_kv = 1;
  m.d_ff = 256;
  m.b = 1;
  m.s = std::int64_t{1} << 32;
  m.experts = std::int64_t{1} << 32;
  m.top_k = std::int64_t{1} << 32;
  const std::string e = error_of(m);
  EXPECT_NE(e.find("top_k (model.top_k) = 4294967296"), std::string::npos) << e;
  EXPECT_NE(e.find("b·s·top_k·h elements"), std::string::npos) << e;
  m.top_k = 2;
  m.experts = 8;
  m.s = 2048;
  EXPECT_EQ(error_of(m), "no error");
}

TEST(Validation, HeadsMustDivideHiddenUnlessHeadDimIsGiven) {
  ModelShape m = load_preset("llama-2-7b");
  m.a = 30;
  m.a_kv = 30;
  const std::string e = error_of(m);
  EXPECT_NE(e.find("h (model.hidden) = 4096 is not divisible by a (model.heads) = 30"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("a = 32"), std::string::npos) << e;  // the nearest head count dividing h
  m.d_head = 128;  // an explicit head dimension makes h % a irrelevant (as in Gemma)
  EXPECT_EQ(error_of(m), "no error");
}

TEST(Validation, TensorParallelMustDivideHeadsAndKvHeads) {
  ModelShape m = load_preset("llama-2-7b");
  m.t = 3;
  const std::string e = error_of(m);
  EXPECT_NE(e.find("t (model.tp) = 3 must divide a (model.heads) = 32"), std::string::npos) << e;
  EXPECT_NE(e.find("usable t: 1, 2, 4, 8, 16"), std::string::npos) << e;
  ModelShape gqa = load_preset("mixtral-8x7b");  // a = 32, a_kv = 8
  gqa.t = 16;                                    // KV heads replicate twice: fine
  EXPECT_EQ(error_of(gqa), "no error");
  gqa.a = 48;
  gqa.a_kv = 12;
  gqa.d_head = 128;
  gqa.t = 16;  // 48 % 16 = 0 but neither 12 | 16 nor 16 | 12
  const std::string kv = error_of(gqa);
  EXPECT_NE(kv.find("a_kv (model.kv_heads) = 12"), std::string::npos) << kv;
}

TEST(Validation, ModelJsonRejectsNonIntegerSizes) {
  ModelShape m;
  try {
    from_json(nlohmann::json::parse(R"({"h": 4096.0})"), m);
    FAIL() << "4096.0 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'h' = 4096.0 must be an integer"), std::string::npos)
        << e.what();
  }
}

// A negative head_dim in a model file is refused by validate(), naming it; it was dropped, and the
// model ran with h / a as if the field were absent.
TEST(Validation, ModelJsonNegativeHeadDimIsRefused) {
  ModelShape m = load_preset("gpt3-2.7b");
  from_json(nlohmann::json::parse(R"({"head_dim": -64})"), m);
  try {
    m.validate();
    FAIL() << "head_dim -64 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim = -64 must be >= 0"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mcr::codesign
