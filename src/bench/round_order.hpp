// The order in which the variants of an interleaved measurement run in each round (internal to
// mcr::bench): shuffled afresh every round from a fixed seed, so that every rank draws the same
// orders, each variant follows each other one equally often on average, and none keeps a fixed
// phase against a periodic disturbance (scheduler slices, another job's cycle), which successive
// permutations of two variants (AB BA AB ...) would give it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace mcr::bench::detail {

class RoundOrder {
 public:
  /// Shuffles `order` for the next round.
  void next(std::vector<std::size_t>& order) { std::shuffle(order.begin(), order.end(), draw_); }

 private:
  static constexpr std::uint32_t kSeed = 0x6d637231;
  std::mt19937 draw_{kSeed};
};

}  // namespace mcr::bench::detail
