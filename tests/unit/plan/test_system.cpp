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
  for (const char* n : {"dgx-a100", "dgx-h100", "local-cpu"}) {
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

}  // namespace
}  // namespace mcr::plan
