// Tuning-table construction from measured samples (winner per size with hysteresis, adjacent sizes
// merged); validation of a table file's text is the runtime's own (TuningTable::problems).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "mcr/bench/table.hpp"
#include "mcr/errors.hpp"

namespace mcr::bench {
namespace {

struct Key {
  OpType op;
  std::string dtype_class;
  int group_size;
  int hosts;
  int ranks_per_host;
  std::string form;
  auto tie() const { return std::tie(op, dtype_class, group_size, hosts, ranks_per_host, form); }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

// Times of one size: per backend, per number of operations in flight (0 where not recorded).
using TimesByDepth = std::map<std::string, std::map<int, double>>;

// Each backend's worst slowdown against the fastest backend at the same number in flight, over
// the numbers it was measured at: 1 for a backend that is fastest at every one. With a single
// number in flight this orders the backends as their times do.
std::map<std::string, double> worst_slowdowns(const TimesByDepth& times) {
  std::map<int, double> best;
  for (const auto& [backend, by_depth] : times) {
    for (const auto& [depth, t] : by_depth) {
      auto [it, fresh] = best.emplace(depth, t);
      if (!fresh) it->second = std::min(it->second, t);
    }
  }
  std::map<std::string, double> worst;
  for (const auto& [backend, by_depth] : times) {
    double w = 0;
    for (const auto& [depth, t] : by_depth)
      w = std::max(w, t / best.at(depth));
    worst[backend] = w;
  }
  return worst;
}

// Winner per measured size, walking upwards: the current winner keeps a size unless another backend
// beats it there by more than the margin (or the current one was not measured at that size).
// Where a size was measured with several numbers of operations in flight, "beats" compares worst
// slowdowns: the winner is the backend that loses least where it is not the fastest.
std::vector<std::pair<std::size_t, std::string>> winners(
    const std::map<std::size_t, TimesByDepth>& by_size, double hysteresis) {
  std::vector<std::pair<std::size_t, std::string>> out;
  std::string current;
  for (const auto& [bytes, times] : by_size) {
    const auto score = worst_slowdowns(times);
    auto best = std::min_element(score.begin(), score.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    auto cur = score.find(current);
    if (cur == score.end() || best->second < cur->second * (1.0 - hysteresis))
      current = best->first;
    out.emplace_back(bytes, current);
  }
  return out;
}

}  // namespace

std::vector<TuningSample> without_wrong_backends(std::vector<TuningSample> samples,
                                                 const std::vector<TuningSample>& wrong) {
  const auto same_place = [](const TuningSample& a, const TuningSample& b) {
    return a.op == b.op && a.dtype_class == b.dtype_class && a.group_size == b.group_size &&
           a.hosts == b.hosts && a.ranks_per_host == b.ranks_per_host && a.form == b.form &&
           a.backend == b.backend;
  };
  std::erase_if(samples, [&](const TuningSample& s) {
    return std::any_of(wrong.begin(), wrong.end(),
                       [&](const TuningSample& w) { return same_place(s, w); });
  });
  return samples;
}

std::vector<TuningEntry> build_entries(const std::vector<TuningSample>& samples,
                                       double hysteresis) {
  if (hysteresis < 0 || hysteresis >= 1) {
    throw InvalidArgument(fmt::format("tune.hysteresis {}: must be in [0, 1)", hysteresis));
  }
  std::map<Key, std::map<std::size_t, TimesByDepth>> grouped;
  for (const auto& s : samples) {
    if (!(s.time_us > 0) || !std::isfinite(s.time_us)) continue;  // failed or unmeasured points
    auto& slot = grouped[Key{s.op, s.dtype_class, s.group_size, s.hosts, s.ranks_per_host, s.form}]
                        [s.bytes][s.backend][s.in_flight];
    slot = slot > 0 ? std::min(slot, s.time_us) : s.time_us;
  }
  std::vector<TuningEntry> entries;
  for (const auto& [key, by_size] : grouped) {
    const auto points = winners(by_size, hysteresis);
    TuningEntry e{key.op,    key.dtype_class,    key.group_size, {},
                  key.hosts, key.ranks_per_host, key.form};
    for (std::size_t i = 0; i < points.size(); ++i) {
      const auto& [bytes, backend] = points[i];
      if (!e.ranges.empty() && e.ranges.back().backend == backend) continue;
      std::size_t lo = 0;
      if (!e.ranges.empty()) {
        // Boundary at the geometric mean of the neighbouring measured sizes.
        const double prev = static_cast<double>(std::max<std::size_t>(points[i - 1].first, 1));
        lo = static_cast<std::size_t>(std::ceil(std::sqrt(prev * static_cast<double>(bytes))));
        lo = std::clamp(lo, points[i - 1].first + 1, bytes);
        e.ranges.back().max_bytes = lo - 1;
      }
      e.ranges.push_back(TuningRange{lo, kMaxBytes, backend});
    }
    if (!e.ranges.empty()) entries.push_back(std::move(e));
  }
  // A message's two ends select independently (send on one rank, recv on the other): they must
  // agree.
  std::vector<TuningEntry> recv;
  for (const auto& e : entries) {
    if (e.op != OpType::send) continue;
    const bool have = std::any_of(entries.begin(), entries.end(), [&](const TuningEntry& o) {
      return o.op == OpType::recv && o.dtype_class == e.dtype_class &&
             o.group_size == e.group_size && o.hosts == e.hosts &&
             o.ranks_per_host == e.ranks_per_host;
    });
    if (!have) {
      recv.push_back(e);
      recv.back().op = OpType::recv;
    }
  }
  entries.insert(entries.end(), recv.begin(), recv.end());
  return entries;
}

std::vector<std::string> validate_table_text(std::string_view text) {
  return TuningTable::problems(text);  // the same checks that loading a table applies
}

}  // namespace mcr::bench
