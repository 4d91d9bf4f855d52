// The advisor's error bar: the device's calibrated held-out error where it has one, the fixed
// default (with a note saying so) where it has none, and --uncertainty over both.
#include <gtest/gtest.h>

#include "mcr/codesign/advisor.hpp"
#include "mcr/errors.hpp"

namespace mcr::codesign {
namespace {

DeviceSpec calibrated(double median_pct, double p90_pct) {
  DeviceSpec d = device_from_catalog("a100-80gb");
  d.prediction_error = PredictionError{40, median_pct, p90_pct, "sweep.json, seed 5"};
  return d;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(ErrorBar, WithoutCalibrationTheDefaultWithANote) {
  DeviceSpec d = device_from_catalog("a100-80gb");
  d.prediction_error.reset();
  const Uncertainty u = advisor_uncertainty(d, std::nullopt);
  EXPECT_DOUBLE_EQ(u.value, kDefaultUncertainty);
  EXPECT_TRUE(contains(u.source, "fixed default")) << u.source;
  EXPECT_TRUE(contains(u.source, "records no calibration")) << u.source;
}

TEST(ErrorBar, CalibratedDeviceGivesItsHeldOutMedian) {
  const Uncertainty u = advisor_uncertainty(calibrated(6.5, 14.0), std::nullopt);
  EXPECT_DOUBLE_EQ(u.value, 0.065);
  EXPECT_TRUE(contains(u.source, "median held-out |error|")) << u.source;
  EXPECT_TRUE(contains(u.source, "p90 14.0%")) << u.source;
  EXPECT_TRUE(contains(u.source, "sweep.json, seed 5")) << u.source;
}

TEST(ErrorBar, GivenValueWinsAndIsChecked) {
  const Uncertainty u = advisor_uncertainty(calibrated(6.5, 14.0), 0.01);
  EXPECT_DOUBLE_EQ(u.value, 0.01);
  EXPECT_EQ(u.source, "--uncertainty");
  EXPECT_THROW(advisor_uncertainty(calibrated(6.5, 14.0), -0.1), InvalidArgument);
  EXPECT_THROW(advisor_uncertainty(calibrated(6.5, 14.0), 1.5), InvalidArgument);
}

// GPT-3 2.7B on an A100 has candidates from about +0.4% to about +7%, so an error bar of 5% splits
// them; every candidate is judged against the device's bar, not the 3% default.
TEST(ErrorBar, AdvisorJudgesCandidatesByTheDeviceBar) {
  const ModelShape m = load_preset("gpt3-2.7b");
  const Advice advice = advise(m, calibrated(5.0, 20.0), AdvisorOptions{});
  ASSERT_FALSE(advice.candidates.empty());
  EXPECT_DOUBLE_EQ(advice.uncertainty, 0.05);
  EXPECT_TRUE(contains(advice.uncertainty_source, "a100-80gb")) << advice.uncertainty_source;
  int significant = 0;
  for (const auto& c : advice.candidates) {
    EXPECT_EQ(c.significant, c.model_speedup - 1.0 >= 0.05) << c.changes;
    significant += c.significant ? 1 : 0;
  }
  EXPECT_GT(significant, 0);
  EXPECT_LT(significant, static_cast<int>(advice.candidates.size()));
  AdvisorOptions given;
  given.uncertainty = 0.0;
  const Advice all = advise(m, calibrated(5.0, 20.0), given);
  for (const auto& c : all.candidates)
    EXPECT_TRUE(c.significant) << c.changes;
}

TEST(ErrorBar, DeviceJsonKeepsAndChecksIt) {
  const DeviceSpec d = calibrated(4.25, 9.5);
  const nlohmann::json j = d;
  EXPECT_EQ(j.at("prediction_error").at("count"), 40);
  EXPECT_EQ(j.get<DeviceSpec>(), d);
  nlohmann::json bad = j;
  bad["prediction_error"]["p90_abs_pct_error"] = 1.0;  // below the median
  try {
    bad.get<DeviceSpec>();
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_TRUE(contains(e.what(), "prediction_error")) << e.what();
  }
  bad = j;
  bad["prediction_error"].erase("source");
  EXPECT_THROW(bad.get<DeviceSpec>(), InvalidArgument);
  DeviceSpec none = d;
  none.prediction_error.reset();
  EXPECT_FALSE(nlohmann::json(none).contains("prediction_error"));
}

}  // namespace
}  // namespace mcr::codesign
