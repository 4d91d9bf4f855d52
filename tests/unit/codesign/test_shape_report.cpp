// The whole report of one model on one device: the advisor's analysis reused, memory findings
// after the guidelines', counts and estimates for the layout, and the JSON that holds them.
#include <gtest/gtest.h>

#include "mcr/codesign/report.hpp"
#include "mcr/codesign/shape_report.hpp"
#include "mcr/errors.hpp"

namespace mcr::codesign {
namespace {

TEST(ShapeReport, WithoutTheAdvisorItIsThePlainAnalysis) {
  const ModelShape model = load_preset("gpt3-2.7b");
  const DeviceSpec device = device_from_catalog("a100-80gb");
  ShapeReportOptions o;
  o.advise = false;
  o.training = true;
  const ShapeReport r = analyse_shape(model, device, o);
  EXPECT_FALSE(r.advised);
  EXPECT_EQ(analysis_json(r.analysis), analysis_json(analyze(model, device, true)));
  EXPECT_EQ(r.params.total, count_parameters(model).total);
  EXPECT_DOUBLE_EQ(r.training_memory.total, training_memory(model, o.layout).total);
  EXPECT_DOUBLE_EQ(r.inference_memory.total, inference_memory(model, o.layout).total);
  const auto guidelines = check_guidelines(model, device, r.analysis);
  ASSERT_GE(r.findings.size(), guidelines.size());
  for (std::size_t i = 0; i < guidelines.size(); ++i)
    EXPECT_EQ(r.findings[i].message, guidelines[i].message);
}

TEST(ShapeReport, TheAdvisorsInputAnalysisIsReused) {
  const ModelShape model = load_preset("gpt3-2.7b");
  const DeviceSpec device = device_from_catalog("a100-80gb");
  ShapeReportOptions o;
  o.advisor.top = 2;
  const ShapeReport r = analyse_shape(model, device, o);
  EXPECT_TRUE(r.advised);
  EXPECT_EQ(analysis_json(r.analysis), analysis_json(r.advice.input_analysis));
  EXPECT_EQ(analysis_json(r.analysis), analysis_json(analyze(model, device, false)));
}

TEST(ShapeReport, JsonHoldsTheLayoutAndTheAdviceOnlyWhenAdvised) {
  const ModelShape model = load_preset("gpt3-2.7b");
  const DeviceSpec device = device_from_catalog("a100-80gb");
  ShapeReportOptions o;
  o.advise = false;
  o.layout.pp = 2;
  o.layout.zero_stage = 1;
  const auto j = to_json(analyse_shape(model, device, o), model, device, o);
  EXPECT_EQ(j["memory"]["layout"]["pp"], 2);
  EXPECT_EQ(j["memory"]["layout"]["zero_stage"], 1);
  EXPECT_EQ(j["memory"]["layout"]["t"], model.t);
  EXPECT_DOUBLE_EQ(j["memory"]["device_memory_gb"].get<double>(), device.memory_gb);
  EXPECT_TRUE(j.contains("guidelines"));
  EXPECT_TRUE(j.contains("params"));
  EXPECT_FALSE(j.contains("advice"));
  EXPECT_FALSE(j.contains("inputs"));
}

TEST(ShapeReport, ABadLayoutIsRejected) {
  ShapeReportOptions o;
  o.advise = false;
  o.layout.pp = 0;
  EXPECT_THROW((void)analyse_shape(load_preset("gpt3-2.7b"), device_from_catalog("a100-80gb"), o),
               InvalidArgument);
}

}  // namespace
}  // namespace mcr::codesign
