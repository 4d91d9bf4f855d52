// Host maps and a communicator's view of them (topology.hpp).
#include <gtest/gtest.h>

#include <sstream>

#include "bootstrap/host.hpp"
#include "mcr/errors.hpp"
#include "runtime/topology.hpp"

namespace mcr::detail {
namespace {

TEST(Topology, HostIndicesFollowFirstAppearance) {
  EXPECT_EQ(host_indices({"b/1/n", "a/1/n", "b/1/n", "c/1/n", "a/1/n"}),
            (std::vector<int>{0, 1, 0, 2, 1}));
  EXPECT_EQ(host_indices({}), std::vector<int>{});
}

TEST(Topology, FourHostsOneRankEach) {
  const auto t = group_topology({0, 1, 2, 3}, {0, 1, 2, 3});
  EXPECT_EQ(t.hosts, 4);
  EXPECT_EQ(t.ranks_per_host, 1);
  EXPECT_EQ(t.local_index, (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(t.describe(), "4x1");
}

TEST(Topology, TwoByTwoWithRanksInterleaved) {
  // mpirun --map-by node puts consecutive ranks on different hosts.
  const auto t = group_topology({0, 1, 0, 1}, {0, 1, 2, 3});
  EXPECT_EQ(t.hosts, 2);
  EXPECT_EQ(t.ranks_per_host, 2);
  EXPECT_EQ(t.host_of_member, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(t.local_index, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(t.describe(), "2x2");
}

TEST(Topology, SubgroupRenumbersItsHosts) {
  // World 2x2 (ranks 0,1 on host 0; 2,3 on host 1); the group {3, 1} spans both hosts, and the
  // group's first member's host is its host 0.
  const auto t = group_topology({0, 0, 1, 1}, {3, 1});
  EXPECT_EQ(t.hosts, 2);
  EXPECT_EQ(t.ranks_per_host, 1);
  EXPECT_EQ(t.host_of_member, (std::vector<int>{0, 1}));
  const auto same = group_topology({0, 0, 1, 1}, {2, 3});
  EXPECT_EQ(same.hosts, 1);
  EXPECT_EQ(same.ranks_per_host, 2);
}

TEST(Topology, UnevenHostsHaveNoRanksPerHost) {
  const auto t = group_topology({0, 0, 0, 1}, {0, 1, 2, 3});
  EXPECT_EQ(t.hosts, 2);
  EXPECT_FALSE(t.uniform());
  EXPECT_EQ(t.ranks_per_host, 0);
  EXPECT_EQ(t.describe(), "2 hosts, uneven");
}

TEST(Topology, EmptyHostMapIsOneHost) {
  const auto t = group_topology({}, {0, 1, 2});
  EXPECT_EQ(t.hosts, 1);
  EXPECT_EQ(t.ranks_per_host, 3);
  EXPECT_EQ(t.local_index, (std::vector<int>{0, 1, 2}));
}

TEST(Topology, RankOutsideTheMapIsAnError) {
  EXPECT_THROW(group_topology({0, 1}, {0, 2}), InvalidArgument);
}

}  // namespace
}  // namespace mcr::detail

// The store's address on several hosts is that of the default route's interface. A VPN that routes
// everything through itself adds 0.0.0.0/1 and 128.0.0.0/1, and the first has destination 0 too:
// read as the default route, its address (which peers cannot reach) was advertised. Only
// destination and mask 0, up, lowest metric.
TEST(Host, DefaultRouteIsDestinationAndMaskZero) {
  std::istringstream table(
      "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
      "tun0\t00000000\t0100080A\t0003\t0\t0\t0\t00000080\t0\t0\t0\n"
      "eth1\t00000000\t010200C0\t0002\t0\t0\t0\t00000000\t0\t0\t0\n"  // not up
      "eth0\t00000000\t010200C0\t0003\t0\t0\t200\t00000000\t0\t0\t0\n"
      "wlan0\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n"
      "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n");
  EXPECT_EQ(mcr::detail::default_route_interface(table), "eth0");
  std::istringstream none("Iface\tDestination\n");
  EXPECT_EQ(mcr::detail::default_route_interface(none), "");
}
