// The system catalog: shipped systems load, carry sources, and bad files name the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "mcr/errors.hpp"
#include "mcr/plan/system.hpp"

namespace mcr::plan {
namespace {

TEST(PlanSystem, CatalogHasTheRequiredSystems) {
  const auto names = catalog_systems();
  for (const char* n : {"dgx-a100", "dgx-h100", "dgx-b200", "gb200-nvl72", "local-cpu"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
}

TEST(PlanSystem, DgxA100) {
  const auto s = system_from_catalog("dgx-a100");
  EXPECT_EQ(s.device, "a100-80gb");
  EXPECT_EQ(s.gpus_per_node, 8);
  EXPECT_DOUBLE_EQ(s.intra.bandwidth_gbs, 300);  // 600 GB/s NVLink, both directions
  EXPECT_DOUBLE_EQ(s.inter.bandwidth_gbs, 25);   // one 200 Gb/s HDR adapter per GPU
  EXPECT_GE(s.total_gpus(), 4096);
}

TEST(PlanSystem, BlackwellSystems) {
  // DGX B200 User Guide: 8 GPUs, NVLink 5 at 14.4 TB/s for the node (900 GB/s each way per GPU),
  // one ConnectX-7 per GPU. GB200 NVL72: 72 GPUs in one NVLink domain.
  const auto b = system_from_catalog("dgx-b200");
  EXPECT_EQ(b.device, "b200");
  EXPECT_EQ(b.gpus_per_node, 8);
  EXPECT_DOUBLE_EQ(b.intra.bandwidth_gbs, 14400.0 / 8 / 2);
  EXPECT_DOUBLE_EQ(b.inter.bandwidth_gbs, 50);
  const auto g = system_from_catalog("gb200-nvl72");
  EXPECT_EQ(g.gpus_per_node, 72);
  EXPECT_DOUBLE_EQ(g.intra.bandwidth_gbs, b.intra.bandwidth_gbs);
}

TEST(PlanSystem, EveryEfficiencyCitesASource) {
  // The fitted or derived constants say where they come from; an FP8 factor lies in (0, 1].
  for (const auto& name : catalog_systems()) {
    const auto s = system_from_catalog(name);
    EXPECT_TRUE(s.sources.count("compute_efficiency") || s.compute_efficiency == 1.0) << name;
    for (const auto& [dtype, factor] : s.dtype_efficiency) {
      EXPECT_TRUE(s.sources.count("dtype_efficiency." + dtype)) << name << ": " << dtype;
      EXPECT_GT(factor, 0);
      EXPECT_LE(factor, 1);
    }
  }
  // H100: MAMF FP8 1402.6 of 1978.9 over BF16 794.5 of 989.4 (docs/gpu-facts.md).
  EXPECT_NEAR(system_from_catalog("dgx-h100").efficiency_of("fp8"),
              (1402.6 / 1978.9) / (794.5 / 989.4), 5e-4);
  EXPECT_DOUBLE_EQ(system_from_catalog("dgx-a100").efficiency_of("fp8"), 1.0);
}

TEST(PlanSystem, EveryLinkValueCitesASource) {
  for (const auto& name : catalog_systems()) {
    const auto s = system_from_catalog(name);
    for (const char* f : {"intra.bandwidth_gbs", "intra.latency_us", "inter.bandwidth_gbs",
                          "inter.latency_us", "gpus_per_node"}) {
      EXPECT_TRUE(s.sources.count(f)) << name << ": " << f;
    }
  }
}

TEST(PlanSystem, UnknownNameListsTheCatalog) {
  try {
    resolve_system("no-such-system");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("dgx-a100"), std::string::npos) << e.what();
  }
}

TEST(PlanSystem, BadFieldIsNamed) {
  const std::string path = ::testing::TempDir() + "bad-system.json";
  {
    std::ofstream out(path);
    out << R"({"name": "x", "device": "a100-80gb", "nodes": 2, "gpus_per_node": 8,
              "intra": {"bandwidth_gbs": 0}, "inter": {"bandwidth_gbs": 10}})";
  }
  try {
    load_system(path);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("intra.bandwidth_gbs"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

// A field of the wrong JSON type names the field (it was nlohmann's bare "type must be number");
// a fractional count of GPUs is refused (it was read as 8), and so is a count past an int (it
// wrapped to a negative number and was reported as such).
TEST(PlanSystem, FieldsOfTheWrongTypeOrRangeAreNamed) {
  const std::string path = ::testing::TempDir() + "odd-system.json";
  const auto refused = [&](const std::string& fields, const std::string& want) {
    {
      std::ofstream out(path);
      out << R"({"name": "x", "device": "a100-80gb", )" << fields
          << R"(, "intra": {"bandwidth_gbs": 100}, "inter": {"bandwidth_gbs": 10}})";
    }
    try {
      load_system(path);
      ADD_FAILURE() << fields << " accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  refused(R"("nodes": "4", "gpus_per_node": 8)", "field 'nodes' = \"4\"");
  refused(R"("nodes": 2, "gpus_per_node": 8.5)", "field 'gpus_per_node' = 8.5 must be an integer");
  refused(R"("nodes": 3000000000, "gpus_per_node": 8)",
          "field 'nodes' = 3000000000 is out of range");
  refused(R"("nodes": 2, "gpus_per_node": 8, "compute_efficiency": "high")",
          "field 'compute_efficiency'");
  // A misspelt key took its field's default (efficiency 1.0: every GEMM 25% faster), unseen.
  refused(R"("nodes": 2, "gpus_per_node": 8, "compute_eficiency": 0.8)",
          "system: unknown field 'compute_eficiency'");
  {
    std::ofstream out(path);
    out << R"({"name": "x", "device": "a100-80gb", "nodes": 2, "gpus_per_node": 8,
              "intra": {"bandwidth_gbs": 100, "latency": 5}, "inter": {"bandwidth_gbs": 10}})";
  }
  try {
    load_system(path);
    ADD_FAILURE() << "intra.latency accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("system field 'intra': unknown field 'latency'"),
              std::string::npos)
        << e.what();
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace mcr::plan
