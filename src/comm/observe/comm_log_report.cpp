// The communication log's outputs: the DeepSpeed-style summary with a straggler view, and the
// Chrome trace-event file.
#include <algorithm>
#include <map>
#include <ostream>
#include <set>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mcr/comm/bandwidth.hpp"
#include "mcr/comm/comm_log.hpp"
#include "mcr/comm/info.hpp"
#include "mcr/comm/selection.hpp"

namespace mcr {
namespace {

double micros(const LogRecord& r) {
  return static_cast<double>(r.end_ns - r.start_ns) * 1e-3;
}

}  // namespace

LogSummary summarize(const GatheredLog& log) {
  // A row per group size too: the same op, size and backend on a group of 2 and on the world of 4
  // are different collectives (a member count to match, a bus factor).
  using RowKey = std::tuple<OpType, std::size_t, std::string_view, int>;
  // A collective instance: the k-th (op, bytes, backend) of a group on each member. Matching by
  // occurrence rather than sequence number stays right when p2p traffic shifts sequence numbers.
  using InstanceKey = std::tuple<std::uint64_t, OpType, std::size_t, std::string_view, std::size_t>;
  std::map<RowKey, std::vector<double>> latencies;
  std::map<InstanceKey, std::vector<std::pair<int, double>>> instances;
  std::map<InstanceKey, int> instance_sizes;
  std::map<std::tuple<int, std::uint64_t, OpType, std::size_t, std::string_view>, std::size_t> seen;
  // A row per global rank of the log: the gathered ones (a log collected over a sub-communicator
  // holds world ranks beyond its size; rows 0 .. ranks - 1 showed other ranks, empty, and dropped
  // the members' records), else 0 .. ranks - 1, and any rank a record names.
  std::map<int, StragglerRow> per_rank;
  const auto row_of = [&per_rank](int rank) -> StragglerRow& {
    auto& row = per_rank[rank];
    row.rank = rank;
    return row;
  };
  bool gathered = false;
  for (std::size_t g = 0; g < log.hosts.size(); ++g) {
    if (log.hosts[g] >= 0) (void)row_of(static_cast<int>(g)), gathered = true;
  }
  for (int q = 0; !gathered && q < log.ranks; ++q)
    (void)row_of(q);

  // Occurrences are counted in each rank's issue order (its communicator's sequence numbers), not
  // in the order completions were recorded: two same-sized async collectives waited for in opposite
  // orders on two ranks are still the same two instances.
  std::vector<const LogRecord*> in_issue_order;
  in_issue_order.reserve(log.records.size());
  for (const auto& r : log.records)
    in_issue_order.push_back(&r);
  std::stable_sort(in_issue_order.begin(), in_issue_order.end(),
                   [](const LogRecord* x, const LogRecord* y) {
                     return std::tie(x->global_rank, x->group_id, x->sequence) <
                            std::tie(y->global_rank, y->group_id, y->sequence);
                   });
  for (const LogRecord* record : in_issue_order) {
    const LogRecord& r = *record;
    const RowKey row{r.op, r.bytes, r.backend, r.group_size};
    if (r.global_rank >= 0) {
      auto& s = row_of(r.global_rank);
      ++s.ops;
      s.comm_us += micros(r);
    }
    if (is_point_to_point(r.op) || r.group_size <= 1) {
      latencies[row].push_back(micros(r));
      continue;
    }
    const auto k = seen[{r.global_rank, r.group_id, r.op, r.bytes, r.backend}]++;
    const InstanceKey instance{r.group_id, r.op, r.bytes, r.backend, k};
    instances[instance].emplace_back(r.global_rank, micros(r));
    instance_sizes.emplace(instance, r.group_size);
  }
  for (const auto& [key, members] : instances) {
    const int size = instance_sizes[key];
    const RowKey row{std::get<1>(key), std::get<2>(key), std::get<3>(key), size};
    double lo = members.front().second, hi = lo;
    for (const auto& m : members)
      lo = std::min(lo, m.second), hi = std::max(hi, m.second);
    // One operation, at its slowest member present. Where some member's record is missing (its
    // log filled, or the log was collected over a sub-communicator of the group) there is no
    // straggler figure: the fastest member may be the one missing. (Counted once per member
    // present, such an instance multiplied the row's count and total.)
    latencies[row].push_back(hi);
    if (static_cast<int>(members.size()) != size) continue;
    for (const auto& [rank, us] : members) {
      if (rank >= 0) row_of(rank).straggler_us += us - lo;
    }
  }
  LogSummary out;
  for (auto& [key, lat] : latencies) {
    SummaryRow row;
    row.op = std::get<0>(key);
    row.bytes = std::get<1>(key);
    row.backend = std::string(std::get<2>(key));
    row.group_size = std::get<3>(key);
    row.count = lat.size();
    for (double v : lat)
      row.total_us += v, row.max_us = std::max(row.max_us, v);
    row.avg_us = row.total_us / static_cast<double>(row.count);
    row.p50_us = median(lat);
    row.algbw_gbps = algbw_gbps(row.bytes, row.avg_us * 1e-6);
    row.busbw_gbps = busbw_gbps(row.op, row.bytes, row.avg_us * 1e-6, row.group_size);
    out.rows.push_back(std::move(row));
  }
  for (auto& [rank, row] : per_rank)
    out.stragglers.push_back(std::move(row));
  return out;
}

std::string format_summary(const LogSummary& s, const GatheredLog& log) {
  std::uint64_t dropped = 0;
  for (auto d : log.dropped)
    dropped += d;
  std::string out = fmt::format(
      "mcr communication log: {} ranks, {} operations recorded{}\n"
      "latency of a collective = its slowest member's; bandwidths in GB/s (nccl-tests algbw/busbw) "
      "from avg\n",
      log.ranks, log.records.size(),
      dropped ? fmt::format(", {} not recorded (log full)", dropped) : "");
  // `ranks` (the group's size) last, so that readers of the first columns stay valid.
  out += fmt::format("{:<15} {:>10} {:<8} {:>9} {:>12} {:>10} {:>10} {:>10} {:>9} {:>9} {:>6}\n",
                     "op", "bytes", "backend", "count", "total_ms", "avg_us", "p50_us", "max_us",
                     "algbw", "busbw", "ranks");
  for (const auto& r : s.rows) {
    out += fmt::format(
        "{:<15} {:>10} {:<8} {:>9} {:>12.3f} {:>10.2f} {:>10.2f} {:>10.2f} {:>9.3f} {:>9.3f} "
        "{:>6}\n",
        to_string(r.op), r.bytes, r.backend, r.count, r.total_us * 1e-3, r.avg_us, r.p50_us,
        r.max_us, r.algbw_gbps, r.busbw_gbps, r.group_size);
  }
  out +=
      "straggler view (own latency minus the group's minimum for the same collective, summed):\n";
  out += fmt::format("{:>6} {:>9} {:>12} {:>14} {:>16} {:>7}\n", "rank", "ops", "comm_ms",
                     "straggler_ms", "straggler_avg_us", "share");
  for (const auto& r : s.stragglers) {
    out += fmt::format("{:>6} {:>9} {:>12.3f} {:>14.3f} {:>16.2f} {:>6.1f}%\n", r.rank, r.ops,
                       r.comm_us * 1e-3, r.straggler_us * 1e-3,
                       r.ops ? r.straggler_us / static_cast<double>(r.ops) : 0.0,
                       r.comm_us > 0 ? 100.0 * r.straggler_us / r.comm_us : 0.0);
  }
  return out;
}

void write_chrome_trace(const GatheredLog& log, std::ostream& out) {
  using nlohmann::json;
  std::int64_t base = 0;
  if (!log.records.empty()) {
    base =
        std::min_element(log.records.begin(), log.records.end(), [](const auto& a, const auto& b) {
          return a.start_ns < b.start_ns;
        })->start_ns;
  }
  // tid: a small number per backend name, stable across ranks.
  std::map<std::string_view, int> tids;
  for (const auto& name : backend_names())
    tids.emplace(name, static_cast<int>(tids.size()) + 1);
  for (const auto& r : log.records)
    tids.emplace(r.backend, static_cast<int>(tids.size()) + 1);

  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const json& ev) {
    out << (first ? "" : ",\n") << ev.dump();
    first = false;
  };
  // Asynchronous operations of one backend overlap without nesting (DDP issues a bucket before the
  // last one completes), which a track cannot show (Perfetto draws only nested slices): each goes
  // to the first lane of its rank and backend that is free at its start. Lane k of a backend is the
  // same tid on every rank.
  const int lane_stride = static_cast<int>(tids.size()) + 1;
  std::vector<int> lane_of(log.records.size(), 0);
  std::map<std::pair<int, std::string_view>, std::vector<std::size_t>> by_track;
  for (std::size_t i = 0; i < log.records.size(); ++i)
    by_track[{log.records[i].global_rank, log.records[i].backend}].push_back(i);
  std::map<std::pair<int, std::string_view>, int> tracks;  // -> lanes used
  for (auto& [track, indices] : by_track) {
    std::stable_sort(indices.begin(), indices.end(), [&](std::size_t a, std::size_t b) {
      return log.records[a].start_ns < log.records[b].start_ns;
    });
    std::vector<std::int64_t> lane_end;  // the end of each lane's last slice
    for (const std::size_t i : indices) {
      const auto& r = log.records[i];
      std::size_t lane = 0;
      while (lane < lane_end.size() && lane_end[lane] > r.start_ns)
        ++lane;
      if (lane == lane_end.size()) lane_end.push_back(0);
      lane_end[lane] = r.end_ns;
      lane_of[i] = static_cast<int>(lane);
    }
    tracks[track] = static_cast<int>(lane_end.size());
  }
  // Every global rank with a gathered host (a log collected over a sub-communicator holds global
  // ranks beyond its size: processes 0 .. ranks - 1 would show other ranks, empty), else every
  // rank 0 .. ranks - 1; and any rank a record names. The host goes with the rank's name, so that
  // a reader (mcr tune --refine) can tell which groups span hosts; the label shows it.
  std::set<int> pids;
  for (std::size_t g = 0; g < log.hosts.size(); ++g) {
    if (log.hosts[g] >= 0) pids.insert(static_cast<int>(g));
  }
  if (pids.empty()) {
    for (int q = 0; q < log.ranks; ++q)
      pids.insert(q);
  }
  for (const auto& r : log.records)
    pids.insert(r.global_rank);
  for (const int q : pids) {
    const auto uq = static_cast<std::size_t>(q);
    const int host = uq < log.hosts.size() ? log.hosts[uq] : -1;
    json name_args = {{"name", fmt::format("rank {}", q)}};
    if (host >= 0) name_args["host"] = host;
    emit({{"ph", "M"}, {"name", "process_name"}, {"pid", q}, {"tid", 0}, {"args", name_args}});
    if (host >= 0) {
      emit({{"ph", "M"},
            {"name", "process_labels"},
            {"pid", q},
            {"tid", 0},
            {"args", {{"labels", fmt::format("host {}", host)}}}});
    }
    emit({{"ph", "M"},
          {"name", "process_sort_index"},
          {"pid", q},
          {"tid", 0},
          {"args", {{"sort_index", q}}}});
  }
  for (const auto& [track, lanes] : tracks) {
    for (int lane = 0; lane < lanes; ++lane) {
      const std::string name =
          lane == 0 ? std::string(track.second) : fmt::format("{} ({})", track.second, lane + 1);
      emit({{"ph", "M"},
            {"name", "thread_name"},
            {"pid", track.first},
            {"tid", tids[track.second] + lane * lane_stride},
            {"args", {{"name", name}}}});
    }
  }
  for (std::size_t i = 0; i < log.records.size(); ++i) {
    const auto& r = log.records[i];
    emit({{"ph", "X"},
          {"name", to_string(r.op)},
          {"cat", std::string(r.backend)},
          {"pid", r.global_rank},
          {"tid", tids[r.backend] + lane_of[i] * lane_stride},
          {"ts", static_cast<double>(r.start_ns - base) * 1e-3},
          {"dur", static_cast<double>(r.end_ns - r.start_ns) * 1e-3},
          {"args",
           {{"sequence", r.sequence},
            {"bytes", r.bytes},
            {"count", r.count},
            {"dtype", to_string(r.dtype)},
            {"async", r.async},
            {"group", fmt::format("{:016x}", r.group_id)},
            {"group_rank", r.group_rank},
            {"group_size", r.group_size},
            {"algbw_gbps", r.algbw_gbps()},
            {"busbw_gbps", r.busbw_gbps()}}}});
  }
  out << "\n]}\n";
}

}  // namespace mcr
