// A GEMM request: the GEMMs it asks for (grid and models), its checks before anything is timed,
// and the comparison's JSON and CSV.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "mcr/errors.hpp"
#include "mcr/gemmbench/compare.hpp"
#include "mcr/gemmbench/request.hpp"

namespace mcr::codesign::bench {
namespace {

std::string message_of(const GemmRequest& r) {
  try {
    (void)requested_gemms(r);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected InvalidArgument";
  return {};
}

TEST(GemmRequest, DtypeListsKeepTheirOrder) {
  EXPECT_EQ(parse_dtype_lists({"bf16,fp32", "fp16"}),
            (std::vector<DType>{DType::bf16, DType::fp32, DType::fp16}));
  try {
    (void)parse_dtype_lists({"fp32,int4"});
    FAIL() << "int4 was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("request.dtypes: ", 0), 0u) << e.what();
  }
}

TEST(GemmRequest, TheGridIsEveryCombination) {
  GemmRequest r;
  r.m = "64,128";
  r.n = "32";
  r.k = "16:48:16";
  const auto gemms = requested_gemms(r);
  ASSERT_EQ(gemms.size(), 6u);  // 2 m x 1 n x 3 k, fp32 by default
  EXPECT_EQ(gemms[0].m, 64);
  EXPECT_EQ(gemms[0].k, 16);
  EXPECT_EQ(gemms[5].m, 128);
  EXPECT_EQ(gemms[5].k, 48);
  for (const auto& g : gemms) {
    EXPECT_EQ(g.dtype, DType::fp32);
    EXPECT_EQ(g.role, "grid");
  }
}

// A repeated value, dtype, preset or model is read once: each repeat timed the same GEMMs again
// and counted them twice in --compare's statistics.
TEST(GemmRequest, RepeatsAreReadOnce) {
  GemmRequest grid;
  grid.m = "8,8,16";
  grid.n = "8";
  grid.k = "4:8:4,8";
  grid.batch = "1,1";
  grid.dtypes = {"fp32,fp32"};
  const auto g = requested_gemms(grid);
  ASSERT_EQ(g.size(), 4u);  // m 8, 16 x k 4, 8
  EXPECT_EQ(g[0].m, 8);
  EXPECT_EQ(g[0].k, 4);
  EXPECT_EQ(g[3].m, 16);
  EXPECT_EQ(g[3].k, 8);

  GemmRequest once;
  once.presets = {"gpt3-2.7b"};
  once.dtypes = {"fp32"};
  GemmRequest twice = once;
  twice.presets = {"gpt3-2.7b", "gpt3-2.7b"};
  twice.dtypes = {"fp32", "fp32"};
  EXPECT_EQ(requested_gemms(twice).size(), requested_gemms(once).size());
}

TEST(GemmRequest, AValuePastTheLargestIntegerSaysSo) {
  GemmRequest r;
  r.m = "99999999999999999999";
  r.n = "8";
  r.k = "8";
  const auto what = message_of(r);
  EXPECT_NE(what.find("exceeds the largest integer, 2^63-1"), std::string::npos) << what;
  EXPECT_NE(what.find("request.m"), std::string::npos) << what;
  r.m = "-99999999999999999999";
  const auto negative = message_of(r);
  EXPECT_NE(negative.find("must be positive"), std::string::npos) << negative;
}

TEST(GemmRequest, AModelsGemmsAreNamedAfterItAndTakeTheRequestedDtype) {
  GemmRequest r;
  r.presets = {"gpt3-2.7b"};
  r.dtypes = {"fp32"};
  r.tp = 2;
  const auto gemms = requested_gemms(r);
  ASSERT_FALSE(gemms.empty());
  for (const auto& g : gemms) {
    EXPECT_EQ(g.role.rfind("gpt3-2.7b:", 0), 0u) << g.role;
    EXPECT_EQ(g.dtype, DType::fp32);
  }
  r.training = true;
  EXPECT_GT(requested_gemms(r).size(), gemms.size());  // dgrad and wgrad as well
}

// Every kind of layer a model has: DeepSeek-MoE's first layer is dense (an MLP of d_ff = 10944),
// the rest route to experts of 1408. Only the MoE layer's GEMMs were measured, so --compare judged
// fewer GEMMs than the analysis sums; the attention both kinds run is listed once.
TEST(GemmRequest, EveryKindOfLayerIsMeasured) {
  GemmRequest r;
  r.models = {std::string(MCR_HF_FIXTURES) + "/deepseek-moe-16b.json"};
  r.dtypes = {"fp32"};
  const auto gemms = requested_gemms(r);
  const auto count = [&](std::int64_t n, std::int64_t k) {
    return std::count_if(gemms.begin(), gemms.end(),
                         [&](const Gemm& g) { return g.n == n && g.k == k; });
  };
  EXPECT_EQ(count(2048, 10944), 1) << "the dense layer's MLP down projection";
  EXPECT_GE(count(2048, 1408), 1) << "the experts' down projection";
  // One layer's gate and up projections share a shape and both stay; another kind's copy goes.
  const auto kind = [](const Gemm& g) { return g.role.substr(0, g.role.find(' ')); };
  for (std::size_t i = 0; i < gemms.size(); ++i) {
    for (std::size_t j = i + 1; j < gemms.size(); ++j) {
      const Gemm &a = gemms[i], &b = gemms[j];
      EXPECT_FALSE(kind(a) != kind(b) && a.m == b.m && a.n == b.n && a.k == b.k &&
                   a.batch == b.batch && a.pass == b.pass)
          << a.role << " and " << b.role;
    }
  }
  EXPECT_EQ(count(1408, 2048), 2) << "the experts' gate and up projections";
}

// What the import of a config could not model is handed back with the GEMMs (mcr gemm prints
// it, as mcr shape --config does); it was dropped, and a shape read wrongly was measured unsaid.
TEST(GemmRequest, AConfigsImportWarningsAreKept) {
  const std::string path = ::testing::TempDir() + "odd-config.json";
  {
    std::ofstream out(path);
    out << R"({"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8,
              "num_hidden_layers": 2, "vocab_size": 1000, "intermediate_size": 1024,
              "fancy_new_key": 1})";
  }
  GemmRequest r;
  r.models = {path};
  r.dtypes = {"fp32"};
  std::vector<std::string> warnings;
  EXPECT_FALSE(requested_gemms(r, &warnings).empty());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].rfind(path + ": ", 0), 0u) << warnings[0];
  EXPECT_NE(warnings[0].find("fancy_new_key"), std::string::npos) << warnings[0];
  std::remove(path.c_str());
}

TEST(GemmRequest, ErrorsNameTheFields) {
  GemmRequest r;
  EXPECT_EQ(message_of(r).rfind("nothing to run: give request.m/request.n/request.k", 0), 0u);
  r.m = "64";
  EXPECT_EQ(message_of(r).rfind("request.m, request.n and request.k must be given together", 0),
            0u);
  r.n = "8";
  r.k = "8";
  r.batch = "0";
  EXPECT_EQ(message_of(r).rfind("request.batch", 0), 0u) << message_of(r);
}

// The grid's size is its dimensions' product: bounded before any GEMM is made (10^6 of them here
// would take long to build and far longer to run).
TEST(GemmRequest, AGridTooLargeIsRefusedBeforeItIsMade) {
  GemmRequest r;
  r.m = "1:1000";
  r.n = "1:1000";
  r.k = "1";
  const std::string message = message_of(r);
  EXPECT_NE(message.find("1000 m x 1000 n x 1 k x 1 batch x 1 dtype(s) = 1000000 GEMMs, more "
                         "than 100000"),
            std::string::npos)
      << message;
  r.n = "1:100";  // 100 000: at the limit
  EXPECT_EQ(requested_gemms(r).size(), 100000u);
}

// Settings of one kind of GEMM given without it are refused, not dropped.
TEST(GemmRequest, SettingsWithoutTheGemmsTheyApplyToAreRefused) {
  GemmRequest model;
  model.presets = {"pythia-410m"};
  model.batch = "8";
  EXPECT_EQ(message_of(model).rfind("request.batch '8' applies to the m/n/k grid only", 0), 0u)
      << message_of(model);
  GemmRequest grid;
  grid.m = grid.n = grid.k = "64";
  grid.seq = 4096;
  EXPECT_EQ(message_of(grid).rfind("request.seq 4096 applies to the models' GEMMs only", 0), 0u)
      << message_of(grid);
  grid.seq = 0;
  grid.tp = 2;
  EXPECT_EQ(message_of(grid).rfind("request.tp 2 applies", 0), 0u) << message_of(grid);
  grid.tp = 0;
  grid.training = true;
  EXPECT_EQ(message_of(grid).rfind("request.training applies", 0), 0u) << message_of(grid);
  // Both kinds at once: each setting reaches its own.
  grid.training = false;
  grid.presets = {"pythia-410m"};
  grid.seq = 512;
  grid.batch = "2";
  EXPECT_NO_THROW((void)requested_gemms(grid));
}

// The sampler's options are checked with the request, before anything runs (a dry run included),
// naming the fields (mcr gemm names their flags).
TEST(GemmRequest, InconsistentSamplingIsRefusedFirst) {
  GemmRequest r;
  r.m = r.n = r.k = "8";
  r.backend = "cpu";
  r.measure.min_samples = 5;
  r.measure.max_samples = 2;
  try {
    (void)prepare_sweep(r);
    FAIL() << "min_samples 5 with max_samples 2 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "request.measure.max_samples 2: need 1 <= the first <= the second"),
              std::string::npos)
        << e.what();
  }
  r.measure.max_samples = 10;
  r.measure.min_seconds = 10;
  r.measure.max_seconds = 1;
  try {
    (void)prepare_sweep(r);
    FAIL() << "min_seconds 10 with max_seconds 1 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("request.measure.max_seconds 1: need 0 <= the first"),
              std::string::npos)
        << e.what();
  }
}

// A GEMM that cannot run is refused with the request, before the first GEMM is timed: found when
// its turn came, the error ended the sweep and every measurement taken was lost.
TEST(GemmRequest, GemmsThatCannotRunAreRefusedFirst) {
  GemmRequest r;
  r.m = "64,2147483647";  // within the BLAS index range, but A has 2^62 elements
  r.n = "1";
  r.k = "2147483647";
  r.backend = "cpu";
  try {
    (void)prepare_sweep(r);
    FAIL() << "an operand of 2^62 elements accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("m=2147483647 n=1 k=2147483647 batch=1: operand A"),
              std::string::npos)
        << e.what();
  }
}

TEST(GemmRequest, TheProcessClockNeedsOneCpuThread) {
  GemmRequest r;
  r.m = r.n = r.k = "8";
  r.backend = "cpu";
  r.threads = 2;
  r.measure.clock = Clock::process_cpu;
  EXPECT_THROW((void)prepare_sweep(r), InvalidArgument);
}

TEST(GemmRequest, ComparisonJsonAndCsv) {
  ComparisonRow row;
  row.measured.gemm.role = "grid";
  row.measured.gemm.m = 64;
  row.measured.gemm.n = 32;
  row.measured.gemm.k = 16;
  row.measured.gemm.dtype = DType::fp32;
  row.measured.timing.median_s = 2e-6;
  row.measured_tflops = 0.5;
  row.predicted_tflops = 0.75;
  row.ratio = 1.5;
  row.abs_pct_error = 50;
  const std::vector<ComparisonRow> rows{row};
  const auto j = comparison_json(rows, "local-cpu");
  EXPECT_EQ(j["device"], "local-cpu");
  EXPECT_EQ(j["rows"].size(), 1u);
  EXPECT_EQ(j["summary"]["count"], 1);
  EXPECT_DOUBLE_EQ(j["summary"]["median_ratio"].get<double>(), 1.5);
  std::ostringstream csv;
  write_comparison_csv(csv, rows);
  EXPECT_EQ(csv.str(),
            "role,m,n,k,batch,dtype,median_s,measured_tflops,predicted_tflops,ratio,abs_pct_error\n"
            "grid,64,32,16,1,fp32,2e-06,0.5,0.75,1.5,50\n");
}

}  // namespace
}  // namespace mcr::codesign::bench
