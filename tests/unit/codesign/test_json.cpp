// JSON forms: device catalog round trip and citations, model JSON, and the analysis schema.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "mcr/codesign/paths.hpp"
#include "mcr/codesign/report.hpp"
#include "mcr/errors.hpp"

namespace mcr::codesign {
namespace {

TEST(Catalog, CoversIssueDevices) {
  const auto names = catalog_devices();
  for (const char* want : {"v100-sxm2-32gb", "a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie",
                           "h200", "b200", "l40s", "a10", "mi250x-gcd", "mi300x"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
}

TEST(Catalog, EveryValueCitesASource) {
  for (const auto& name : catalog_devices()) {
    SCOPED_TRACE(name);
    const DeviceSpec d = device_from_catalog(name);
    for (const char* field :
         {"compute_units", "clock_mhz", "memory_bandwidth_gbs", "memory_gb", "l2_bytes",
          "alignment_bytes", "tiles", "efficiency.peak_fraction", "efficiency.alignment_tiers",
          "efficiency.k_overhead", "efficiency.memory_efficiency", "efficiency.launch_overhead_s",
          "efficiency.latency_floor_s"}) {
      EXPECT_TRUE(d.sources.count(field) && !d.sources.at(field).empty()) << field;
    }
    for (const auto& [dtype, value] : d.peak_tflops) {
      EXPECT_TRUE(d.sources.count("peak_tflops." + to_string(dtype))) << to_string(dtype);
    }
  }
}

TEST(Catalog, HandCheckedFigures) {
  // A100: 108 SMs and 312 TFLOP/s dense fp16 (A100 whitepaper); H100 SXM: 132 SMs, 989.4 bf16.
  EXPECT_EQ(device_from_catalog("a100-80gb").compute_units, 108);
  EXPECT_DOUBLE_EQ(device_from_catalog("a100-80gb").peak_for(DType::fp16), 312.0);
  EXPECT_EQ(device_from_catalog("h100-sxm").compute_units, 132);
  EXPECT_EQ(device_from_catalog("v100-sxm2-32gb").alignment_elements(DType::fp16), 8);
  EXPECT_EQ(device_from_catalog("a100-80gb").alignment_elements(DType::fp16), 64);
  EXPECT_FALSE(device_from_catalog("v100-sxm2-32gb").supports(DType::bf16));
}

TEST(DeviceJson, RoundTripThroughFile) {
  const auto dir = std::filesystem::temp_directory_path() / "mcr_codesign_test_json";
  std::filesystem::create_directories(dir);
  for (const auto& name : catalog_devices()) {
    const DeviceSpec d = device_from_catalog(name);
    const auto path = dir / (name + ".json");
    save_device(d, path);
    EXPECT_EQ(load_device(path), d) << name;
    EXPECT_EQ(resolve_device(path.string()), d) << name;
  }
  std::filesystem::remove_all(dir);
}

TEST(DeviceJson, ErrorsNameTheField) {
  nlohmann::json j = device_from_catalog("a100-80gb");
  j["compute_units"] = 0;
  try {
    j.get<DeviceSpec>();
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("compute_units = 0"), std::string::npos) << e.what();
  }
  j = device_from_catalog("a100-80gb");
  j.erase("tiles");
  EXPECT_THROW(j.get<DeviceSpec>(), InvalidArgument);
  EXPECT_THROW(device_from_catalog("a100-90gb"), InvalidArgument);
}

TEST(ModelJson, RoundTrip) {
  for (const auto& name : preset_names()) {
    const ModelShape m = load_preset(name);
    EXPECT_EQ(nlohmann::json(m).get<ModelShape>(), m) << name;
  }
}

// A misspelt field would leave its default in place unseen: it is refused, named, with the fields
// a model has; a preset's provenance fields are read.
TEST(ModelJson, AnUnknownFieldIsRefusedByName) {
  nlohmann::json j = load_preset("gpt3-175b");
  j["source"] = "a paper";
  j["notes"] = "read, not used";
  EXPECT_NO_THROW(j.get<ModelShape>());
  j["d_ffn"] = 4096;
  try {
    (void)j.get<ModelShape>();
    ADD_FAILURE() << "d_ffn was accepted";
  } catch (const InvalidArgument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown field 'd_ffn'"), std::string::npos) << m;
    EXPECT_NE(m.find("d_ff_expert"), std::string::npos) << m;
  }
}

// The analysis JSON keeps everything the schema (docs/shape-json.md) lists and parses back to the
// same document, for random shapes and both passes.
TEST(AnalysisJson, RoundTripsThroughSchema) {
  const unsigned seed = 99;
  std::mt19937 rng(seed);
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  const auto presets = preset_names();
  const auto devices = catalog_devices();
  for (int trial = 0; trial < 20; ++trial) {
    ModelShape m = load_preset(presets[rng() % presets.size()]);
    const DeviceSpec d = device_from_catalog(devices[rng() % devices.size()]);
    if (!d.supports(m.dtype)) m.dtype = DType::fp16;
    m.b = 1 + static_cast<std::int64_t>(rng() % 4);
    const bool training = rng() % 2 == 0;
    const ModelAnalysis a = analyze(m, d, training);
    const nlohmann::json j = analysis_json(a);
    // Required by the issue: gemms[] with these keys, totals.time_per_layer_s and totals.tflops.
    ASSERT_TRUE(j.at("gemms").is_array());
    for (const auto& g : j.at("gemms")) {
      for (const char* key : {"role", "m", "n", "k", "batch", "flops", "predicted_time_s",
                              "predicted_tflops", "bytes", "arithmetic_intensity", "explanation"}) {
        ASSERT_TRUE(g.contains(key)) << key;
      }
    }
    ASSERT_TRUE(j.at("totals").at("time_per_layer_s").is_number());
    ASSERT_TRUE(j.at("totals").at("tflops").is_number());
    const nlohmann::json text =
        nlohmann::json::parse(j.dump());  // through text, as a consumer sees it
    const ModelAnalysis back = analysis_from_json(text);
    EXPECT_EQ(analysis_json(back), j);
    EXPECT_EQ(back.layer.size(), a.layer.size());
    EXPECT_EQ(back.model, a.model);
  }
}

TEST(AnalysisJson, RejectsForeignSchema) {
  nlohmann::json j =
      analysis_json(analyze(load_preset("pythia-70m"), device_from_catalog("a10"), false));
  j["schema"] = "something/2";
  EXPECT_THROW(analysis_from_json(j), InvalidArgument);
  j = analysis_json(analyze(load_preset("pythia-70m"), device_from_catalog("a10"), false));
  j["gemms"][0].erase("m");
  EXPECT_THROW(analysis_from_json(j), InvalidArgument);
}

TEST(Paths, EnvironmentOverridesDataDir) {
  // ctest sets MCR_DATA_DIR to the source tree's data/.
  EXPECT_TRUE(std::filesystem::exists(data_dir() / "devices" / "a100-80gb.json"));
}

}  // namespace
}  // namespace mcr::codesign
