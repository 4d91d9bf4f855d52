// The composed backend's configuration (MCR_HIER), its registration, the topology it composes
// over, and when it declines (hier/hier_config.hpp, hier/hier_backend.hpp, hier/hier_compose.hpp).
#include <gtest/gtest.h>

#include "backends/hier/hier_backend.hpp"
#include "backends/hier/hier_compose.hpp"
#include "backends/hier/hier_config.hpp"
#include "core/state.hpp"
#include "mcr/comm/info.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail {
namespace {

TEST(HierConfig, DefaultsSelectBothSteps) {
  const HierConfig c = parse_hier_config("", "MCR_HIER=''");
  EXPECT_TRUE(c.intra.empty());
  EXPECT_TRUE(c.inter.empty());
  EXPECT_EQ(c.simulate_ranks_per_host, 0);
  EXPECT_EQ(c.canonical(), "intra=auto;inter=auto");
}

TEST(HierConfig, FixesEachSide) {
  const HierConfig c = parse_hier_config(" intra = mpi ; inter=gloo ", "x");
  EXPECT_EQ(c.intra, "mpi");
  EXPECT_EQ(c.inter, "gloo");
  EXPECT_EQ(parse_hier_config("inter=auto,simulate_ranks_per_host=2", "x").canonical(),
            "intra=auto;inter=auto;simulate_ranks_per_host=2");
}

TEST(HierConfig, RejectsWithArgumentValueAndRule) {
  auto message = [](const char* text) {
    try {
      (void)parse_hier_config(text, "MCR_HIER='t'");
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  {
    const auto m = message("intra=hier");
    EXPECT_NE(m.find("MCR_HIER='t': intra=hier names no flat backend"), std::string::npos) << m;
  }
  EXPECT_NE(message("inter=tcp").find("inter=tcp"), std::string::npos);
  EXPECT_NE(message("intra=mpi;intra=gloo").find("'intra' appears twice"), std::string::npos);
  EXPECT_NE(message("outer=mpi").find("unknown key 'outer'"), std::string::npos);
  EXPECT_NE(message("mpi").find("not KEY=VALUE"), std::string::npos);
  EXPECT_NE(message("simulate_ranks_per_host=0").find(">= 1"), std::string::npos);
}

TEST(HierConfig, HierIsAKnownBackendName) {
  const auto& names = backend_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "hier"), names.end());
}

GroupTopology real(std::vector<int> host_of_world) {
  std::vector<int> members(host_of_world.size());
  for (std::size_t i = 0; i < members.size(); ++i)
    members[i] = static_cast<int>(i);
  return group_topology(host_of_world, members);
}

// hier reaches the runtime through its registration alone: listed after the flat backends,
// configured by MCR_HIER, and declining with the reason where it cannot compose.
TEST(HierRegistration, IsComposedAfterTheFlatBackends) {
  const auto names = compiled_backend_names();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.back(), "hier");
  ASSERT_EQ(composed_backends().size(), 1u);
  const ComposedBackendFactory& f = composed_backends().front();
  EXPECT_EQ(f.name, "hier");
  EXPECT_EQ(f.config_source, "MCR_HIER");
}

TEST(HierRegistration, CreatesWhereItCanComposeAndSaysWhyNotElsewhere) {
  const ComposedBackendFactory& f = composed_backends().front();
  auto one_host = std::make_shared<CommState>();
  one_host->size = 4;
  one_host->topology = real({0, 0, 0, 0});
  std::string why;
  EXPECT_EQ(f.create(*one_host, {}, "intra=auto;inter=auto", why), nullptr);
  EXPECT_NE(why.find("spans one host"), std::string::npos) << why;

  auto two_hosts = std::make_shared<CommState>();
  two_hosts->size = 4;
  two_hosts->topology = real({0, 0, 1, 1});
  why.clear();
  const auto b = f.create(*two_hosts, {}, "intra=mpi;inter=gloo", why);
  ASSERT_NE(b, nullptr) << why;
  EXPECT_EQ(b->name(), "hier");
  EXPECT_TRUE(b->composes());
  EXPECT_FALSE(b->busy_composing());
  EXPECT_EQ(b->size(), 4);
}

TEST(HierView, DeclinesOneHostUnevenAndOneRankPerHost) {
  EXPECT_NE(hier_unusable_reason(real({0, 0, 0, 0})).find("spans one host"), std::string::npos);
  EXPECT_NE(hier_unusable_reason(real({0, 0, 0, 1})).find("different numbers of its ranks (3 + 1)"),
            std::string::npos);
  EXPECT_NE(hier_unusable_reason(real({0, 1, 2, 3})).find("one rank per host"), std::string::npos);
  EXPECT_EQ(hier_unusable_reason(real({0, 1, 0, 1})), "");  // round-robin placement composes
}

TEST(HierView, SimulatedHostsAreConsecutiveBlocks) {
  HierConfig c;
  c.simulate_ranks_per_host = 2;
  const GroupTopology t = hier_view(real({0, 0, 0, 0}), 4, c);
  EXPECT_EQ(t.hosts, 2);
  EXPECT_EQ(t.ranks_per_host, 2);
  EXPECT_EQ(t.host_of_member, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(t.local_index, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_NE(hier_unusable_reason(hier_view(real({0, 0, 0}), 3, c)).find("(2 + 1)"),
            std::string::npos);
}

TEST(HierCompose, StepsOfEachOp) {
  const auto ar = composed_steps(OpType::all_reduce);
  ASSERT_EQ(ar.size(), 3u);
  EXPECT_TRUE(ar[0].intra);
  EXPECT_EQ(ar[0].op, OpType::reduce_scatter);
  EXPECT_FALSE(ar[1].intra);
  EXPECT_EQ(ar[1].op, OpType::all_reduce);
  EXPECT_EQ(ar[2].op, OpType::all_gather);
  for (OpType op : {OpType::all_gather, OpType::reduce_scatter, OpType::broadcast, OpType::reduce})
    EXPECT_EQ(composed_steps(op).size(), 2u) << to_string(op);
  for (OpType op : {OpType::all_to_all, OpType::gather, OpType::barrier, OpType::send})
    EXPECT_TRUE(composed_steps(op).empty()) << to_string(op);
}

// The step sizes `mcr tune` measures and explain() shows, from the composition itself: an
// all_reduce of 16 MiB f32 on 2 ranks per host runs in 4 pieces of 4 MiB, each host's share of a
// piece (2 MiB) crossing hosts; a count that does not divide is padded.
TEST(HierCompose, StepSizes) {
  const auto ar = hier_steps(OpType::all_reduce, DType::f32, std::size_t{16} << 20, 2);
  ASSERT_EQ(ar.size(), 3u);
  EXPECT_EQ(ar[0].bytes, std::size_t{4} << 20);
  EXPECT_EQ(ar[1].bytes, std::size_t{2} << 20);
  EXPECT_FALSE(ar[1].within_host);
  EXPECT_EQ(ar[2].bytes, std::size_t{4} << 20);
  for (const auto& s : ar)
    EXPECT_EQ(s.times, 4);
  const auto small = hier_steps(OpType::all_reduce, DType::f32, 12, 2);  // 3 floats -> 4
  EXPECT_EQ(small[0].bytes, 16u);
  EXPECT_EQ(small[1].bytes, 8u);
  EXPECT_EQ(small[0].times, 1);
  const auto rs = hier_steps(OpType::reduce_scatter, DType::f32, 4096, 4);
  EXPECT_EQ(rs[0].bytes, 4096u);
  EXPECT_EQ(rs[1].bytes, 1024u);
  const auto ag = hier_steps(OpType::all_gather, DType::bf16, 4096, 2);
  EXPECT_FALSE(ag[0].within_host);
  EXPECT_EQ(ag[0].bytes, 2048u);
  EXPECT_EQ(ag[1].bytes, 4096u);
  EXPECT_TRUE(hier_steps(OpType::all_to_all, DType::f32, 4096, 2).empty());
}

}  // namespace
}  // namespace mcr::detail
