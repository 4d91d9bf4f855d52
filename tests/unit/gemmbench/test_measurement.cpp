#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "mcr/errors.hpp"
#include "mcr/gemmbench/compare.hpp"
#include "mcr/gemmbench/cpu_info.hpp"
#include "mcr/gemmbench/local_device.hpp"
#include "mcr/gemmbench/measurement.hpp"

namespace mcr::codesign::bench {
namespace {

MeasurementSet sample_set() {
  MeasurementSet set;
  set.backend = "cblas";
  set.backend_description = "OpenBLAS test, 2 threads";
  set.command = "mcr gemm -m 64,127 -n 128 -k 1000 --json";
  set.options.min_samples = 7;
  set.options.rotation_bytes = 123456;
  CpuInfo cpu;
  cpu.cores = 2;
  cpu.freq_ghz = 2.5;
  cpu.fma = true;
  cpu.simd_bits = 256;
  cpu.l3_bytes = 32 << 20;
  set.device = cpu_device_spec(cpu, 18.5);
  const std::int64_t dims[][4] = {{64, 128, 1000, 1}, {127, 128, 1000, 1}, {2048, 2048, 64, 16}};
  double t = 1.5e-5;
  for (const auto& d : dims) {
    GemmMeasurement m;
    m.gemm.role = d[3] > 1 ? "attn_score" : "grid";
    m.gemm.m = d[0];
    m.gemm.n = d[1];
    m.gemm.k = d[2];
    m.gemm.batch = d[3];
    m.gemm.dtype = DType::fp32;
    m.timing.median_s = t;
    m.timing.min_s = t * 0.9;
    m.timing.max_s = t * 1.3;
    m.timing.samples = 11;
    m.timing.calls_per_sample = 3;
    m.timing.buffer_sets = 99;
    m.timing.working_set_bytes = 67108864;
    set.rows.push_back(m);
    t *= 3.7;  // not a round number, so float formatting is exercised
  }
  return set;
}

TEST(MeasurementJson, RoundTripsThroughText) {
  const auto set = sample_set();
  const std::string text = nlohmann::json(set).dump(2);
  const auto back = nlohmann::json::parse(text).get<MeasurementSet>();
  EXPECT_EQ(back.backend, set.backend);
  EXPECT_EQ(back.backend_description, set.backend_description);
  EXPECT_EQ(back.command, set.command);
  EXPECT_EQ(back.options.min_samples, 7);
  EXPECT_EQ(back.options.rotation_bytes, 123456u);
  ASSERT_TRUE(back.device.has_value());
  EXPECT_EQ(*back.device, *set.device);
  ASSERT_EQ(back.rows.size(), set.rows.size());
  for (std::size_t i = 0; i < set.rows.size(); ++i) {
    EXPECT_EQ(back.rows[i], set.rows[i]) << "row " << i;
  }
  // And the text is stable: dumping the re-read set gives the same bytes.
  EXPECT_EQ(nlohmann::json(back).dump(2), text);
}

TEST(MeasurementJson, RoundTripsThroughAFile) {
  const auto set = sample_set();
  const auto path = std::filesystem::temp_directory_path() / "mcr_gemm_measurement_test.json";
  save_measurements(set, path);
  const auto back = load_measurements(path);
  std::filesystem::remove(path);
  ASSERT_EQ(back.rows.size(), 3u);
  EXPECT_EQ(back.rows[2], set.rows[2]);
  EXPECT_DOUBLE_EQ(back.rows[2].tflops(), set.rows[2].tflops());
}

TEST(MeasurementJson, RejectsWrongFormatAndBadRows) {
  auto j = nlohmann::json(sample_set());
  j["format"] = "something-else";
  EXPECT_THROW(j.get<MeasurementSet>(), InvalidArgument);
  j = nlohmann::json(sample_set());
  j["measurements"][1]["m"] = 0;
  try {
    j.get<MeasurementSet>();
    FAIL() << "m = 0 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("measurements[1]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_measurements("/nonexistent/mcr.json"), InvalidArgument);
}

TEST(MeasurementCsv, HeaderAndOneLinePerRow) {
  std::ostringstream out;
  write_measurements_csv(out, sample_set());
  const std::string text = out.str();
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "role,m,n,k,batch,dtype,flops,bytes,median_s,min_s,max_s,samples,tflops,gbs");
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4);
  EXPECT_NE(text.find("\ngrid,64,128,1000,1,fp32,1.6384e+07,"), std::string::npos) << text;
}

TEST(Compare, RatioErrorAndSummary) {
  auto set = sample_set();
  const auto rows = compare(set.rows, *set.device);
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& r : rows) {
    EXPECT_DOUBLE_EQ(r.ratio, r.predicted_tflops / r.measured_tflops);
    EXPECT_NEAR(r.abs_pct_error, std::abs(r.ratio - 1) * 100, 1e-9);
  }
  const auto s = summarize(rows);
  EXPECT_EQ(s.count, 3u);
  EXPECT_GE(s.spearman, -1.0);
  EXPECT_LE(s.spearman, 1.0);
  EXPECT_TRUE(std::isnan(summarize({}).spearman));
}

}  // namespace
}  // namespace mcr::codesign::bench
