// `mcr tune --refine`: a tuning table's entries rebuilt where a program's MCR_LOG traces show
// several backends running the same operation at the same size, with the run's median latencies
// in place of the idle-rank figures at that size.
#include "mcr/bench/refine.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "mcr/bench/table.hpp"
#include "mcr/comm/bandwidth.hpp"
#include "mcr/errors.hpp"

namespace mcr::bench {
namespace {

struct PointKey {
  OpType op;
  std::string dtype_class;
  int group_size;
  std::string form;
  std::size_t bytes;
  int world_ranks;  ///< ranks of the traced job; the group spans them all when equal to group_size
  int hosts;        ///< the group's hosts x ranks per host from the trace's host map; 0 x 0
  int ranks_per_host;  ///< when the trace has none (ranks per host 0 alone: uneven)
  int job_hosts;       ///< the same for the traced job's ranks
  int job_ranks_per_host;
  auto tie() const {
    return std::tie(op, group_size, hosts, ranks_per_host, form, bytes, dtype_class, world_ranks,
                    job_hosts, job_ranks_per_host);
  }
  bool operator<(const PointKey& o) const { return tie() < o.tie(); }
};

struct Observations {
  DType dtype = DType::f32;  ///< one dtype of the class, for the table's lookup
  std::map<std::string, std::vector<double>> latencies;  ///< per backend
};

int provenance_int(const TuningTable& t, const char* key) {
  const auto it = t.provenance.find(key);
  if (it == t.provenance.end()) return 0;
  int v = 0;
  const auto* end = it->second.data() + it->second.size();
  const auto [ptr, ec] = std::from_chars(it->second.data(), end, v);
  return ec == std::errc{} && ptr == end && v > 0 ? v : 0;
}

double table_hysteresis(const TuningTable& t) {
  const auto it = t.provenance.find("hysteresis");
  if (it != t.provenance.end()) {
    try {
      std::size_t used = 0;
      const double h = std::stod(it->second, &used);
      if (used == it->second.size() && h >= 0 && h < 1) return h;
    } catch (const std::exception&) {  // not a number: the default below
    }
  }
  return 0.03;
}

bool same_key(const TuningSample& s, const TuningEntry& e) {
  return s.op == e.op && s.dtype_class == e.dtype_class && s.group_size == e.group_size &&
         s.hosts == e.hosts && s.ranks_per_host == e.ranks_per_host && s.form == e.form;
}

const std::string* backend_at(const TuningEntry& e, std::size_t bytes) {
  for (const auto& r : e.ranges) {
    if (bytes >= r.min_bytes && bytes <= r.max_bytes) return &r.backend;
  }
  return nullptr;
}

// The samples an entry was built from: at a size where an earlier refinement left a run's
// medians, those stand for the size (as they did when it was built); elsewhere the tuned ones.
std::vector<TuningSample> effective(const std::vector<TuningSample>& of_entry) {
  std::set<std::size_t> run_sizes;
  for (const auto& s : of_entry) {
    if (s.source == "run") run_sizes.insert(s.bytes);
  }
  std::vector<TuningSample> out;
  for (const auto& s : of_entry) {
    if (!run_sizes.contains(s.bytes) || s.source == "run") out.push_back(s);
  }
  return out;
}

// The hosts x ranks per host of a group of `members` (global ranks) by the trace's host map, as
// the group's communicator counts them (ranks per host 0 where hosts hold different numbers);
// 0 x 0 when the trace has no host map.
HostShape group_shape(const Trace& trace, const std::vector<int>& members) {
  if (trace.hosts.empty()) return {};
  std::map<int, int> per_host;
  for (const int q : members) {
    const auto uq = static_cast<std::size_t>(q);
    if (uq >= trace.hosts.size() || trace.hosts[uq] < 0) return {};  // a rank the map lacks
    ++per_host[trace.hosts[uq]];
  }
  const int first = per_host.empty() ? 0 : per_host.begin()->second;
  const bool even = std::all_of(per_host.begin(), per_host.end(),
                                [&](const auto& h) { return h.second == first; });
  return {static_cast<int>(per_host.size()), even ? first : 0};
}

// Per (op, dtype class, group and its shape, form, size): each backend's latencies. A whole-job
// group in a trace without a host map is taken to have the table's world shape `world`, so that
// traces with and without host maps of one job pool their operations.
std::map<PointKey, Observations> observe(const std::vector<Trace>& traces, HostShape world_shape) {
  std::map<PointKey, Observations> out;
  for (const auto& trace : traces) {
    // The job's ranks: those its operations name, or as many as its host map names (a rank can
    // have run no operation of the trace).
    const int job_ranks = std::max(trace.world_size, static_cast<int>(trace.hosts.size()));
    std::vector<int> world(static_cast<std::size_t>(job_ranks));
    for (std::size_t q = 0; q < world.size(); ++q)
      world[q] = static_cast<int>(q);
    // The job's shape: a trace without a host map is taken to be of the table's.
    const HostShape job = trace.hosts.empty() ? world_shape : group_shape(trace, world);
    for (const auto& op : trace.ops) {
      if (op.backend.empty() || !(op.latency_us > 0)) continue;
      const bool listed = op.group >= 0 && static_cast<std::size_t>(op.group) < trace.groups.size();
      const auto& members = listed ? trace.groups[static_cast<std::size_t>(op.group)] : world;
      const int group_size = static_cast<int>(members.size());
      const bool whole = group_size == job_ranks;
      const HostShape shape = whole ? job : group_shape(trace, members);
      const std::string klass = is_reduction(op.op) ? std::string(dtype_class(op.dtype)) : "any";
      auto& o =
          out[PointKey{op.op, klass, group_size, op.async ? "async" : "sync", op.bytes, job_ranks,
                       shape.hosts, shape.ranks_per_host, job.hosts, job.ranks_per_host}];
      if (o.latencies.empty()) o.dtype = op.dtype;
      o.latencies[op.backend].push_back(op.latency_us);
    }
  }
  return out;
}

// Why the point cannot refine `entry` (empty when it can). `traced` is the group's shape by the
// trace's host map (0 x 0: none), `job` the traced job's, `shape` the one the entry was looked up
// with, `world` the table's.
std::string refusal(const RefinedPoint& p, const TuningEntry* entry, int table_ranks,
                    HostShape traced, HostShape job, HostShape shape, HostShape world,
                    std::size_t min_ops, int world_ranks) {
  const bool whole = p.group_size == world_ranks;
  if (!whole && traced.hosts == 0) {
    return fmt::format(
        "a group of {} of the trace's {} ranks: the trace does not record which hosts its ranks "
        "are on, so which entry it reads is unknown",
        p.group_size, world_ranks);
  }
  if (table_ranks > 0 && world_ranks != table_ranks) {
    return fmt::format("the traced job has {} ranks; the table was measured on {}", world_ranks,
                       table_ranks);
  }
  // Links measured on other hosts say nothing about these: the job's groups and its sub-groups
  // alike.
  if (job.hosts > 0 && world.hosts > 0 && !(job == world)) {
    return fmt::format("the traced job ran on {}; the table was measured on {}", describe(job),
                       describe(world));
  }
  if (entry == nullptr) {
    return fmt::format("the table has no entry for {} on {} ranks ({})", to_string(p.op),
                       p.group_size, describe(shape));
  }
  std::size_t qualified = 0;
  bool before_ran = p.before.empty();
  for (const auto& o : p.observed) {
    if (o.ops < min_ops) continue;
    ++qualified;
    before_ran = before_ran || o.backend == p.before;
  }
  if (qualified < 2) {
    return fmt::format("fewer than two backends ran it {} times or more: nothing to compare",
                       min_ops);
  }
  if (!before_ran) {
    return fmt::format(
        "the table's backend here, {}, did not run it {} times or more in the "
        "traces: not compared",
        p.before, min_ops);
  }
  return {};
}

}  // namespace

RefineResult refine_table(const TuningTable& table, const std::vector<Trace>& traces,
                          const RefineOptions& options) {
  const double hysteresis = options.hysteresis < 0 ? table_hysteresis(table) : options.hysteresis;
  if (hysteresis >= 1) {
    throw InvalidArgument(fmt::format("refine.hysteresis {}: must be in [0, 1)", hysteresis));
  }
  if (options.min_ops == 0) {
    throw InvalidArgument("refine.min_ops 0: a backend's median needs at least one operation");
  }
  std::string paths;  // for messages and the provenance
  for (const auto& t : traces)
    paths += fmt::format("{}{}", paths.empty() ? "" : ", ", t.path);
  const HostShape world{provenance_int(table, "hosts"), provenance_int(table, "ranks_per_host")};
  const auto observed = observe(traces, world);
  if (observed.empty()) {
    throw InvalidArgument(fmt::format(
        "refine: no operation with a backend and a latency in {} (MCR_LOG=trace writes them; an "
        "op list has neither)",
        paths.empty() ? std::string("no trace") : paths));
  }

  RefineResult result;
  result.table = table;
  // The world's shape as the table recorded it (`world` above); a table without it matches
  // entries naming none.
  const int table_ranks = provenance_int(table, "ranks");
  // Entry index -> the points that refine it.
  std::map<std::size_t, std::vector<std::size_t>> by_entry;
  std::set<std::pair<std::size_t, std::size_t>> entry_sizes;  // (entry, bytes) already refined
  for (const auto& [key, obs] : observed) {
    RefinedPoint p{key.op, key.dtype_class, key.group_size, key.form, key.bytes, {}, {}, {}, {},
                   {}};
    for (const auto& [backend, lat] : obs.latencies)
      p.observed.push_back({backend, lat.size(), median(lat)});
    std::sort(p.observed.begin(), p.observed.end(),
              [](const auto& a, const auto& b) { return a.p50_us < b.p50_us; });
    const CallForm form = key.form == "async" ? CallForm::async : CallForm::sync;
    // The entry the group's communicator reads, by the group's shape (a whole job's group in a
    // trace without a host map has the table's world shape); 0 x 0: not known.
    const HostShape traced{key.hosts, key.ranks_per_host};
    p.shape = traced;
    const HostShape shape = traced.hosts > 0 ? traced : world;
    const TuningEntry* entry = table.entry_for(key.op, obs.dtype, key.group_size, shape, form);
    if (entry != nullptr) {
      if (const auto* b = backend_at(*entry, key.bytes)) p.before = *b;
    }
    p.note = refusal(p, entry, table_ranks, traced, {key.job_hosts, key.job_ranks_per_host}, shape,
                     world, options.min_ops, key.world_ranks);
    if (p.note.empty()) {
      const auto index = static_cast<std::size_t>(entry - table.entries.data());
      if (!entry_sizes.insert({index, key.bytes}).second) {
        // Two points of one size on one entry: both call forms read it (the table has one), or
        // groups of two shapes that the entry covers (one naming no topology).
        p.note =
            "the table's entry for this size is already refined by the operations of another "
            "point that reads it (the other call form, or a group of another shape)";
      } else {
        by_entry[index].push_back(result.points.size());
      }
    }
    result.points.push_back(std::move(p));
  }

  for (const auto& [index, point_ids] : by_entry) {
    const TuningEntry& entry = table.entries[index];
    std::vector<TuningSample> of_entry;
    for (const auto& s : table.samples) {
      if (same_key(s, entry)) of_entry.push_back(s);
    }
    std::vector<TuningSample> built_from = effective(of_entry);
    std::string refused;
    if (built_from.empty()) {
      refused = "its entry has no samples to rebuild it from";
    } else {
      const auto rebuilt = build_entries(built_from, hysteresis);
      if (rebuilt.empty() || rebuilt.front().ranges != entry.ranges) {
        refused = fmt::format(
            "its entry's ranges are not what its samples give with hysteresis {} (edited by "
            "hand?): left as it is",
            hysteresis);
      }
    }
    if (!refused.empty()) {
      for (const auto id : point_ids)
        result.points[id].note = refused;
      continue;
    }
    // The run's medians replace every figure at the sizes the run shows (an earlier
    // refinement's included).
    std::set<std::size_t> run_sizes;
    std::vector<TuningSample> run;
    for (const auto id : point_ids) {
      const auto& p = result.points[id];
      run_sizes.insert(p.bytes);
      for (const auto& o : p.observed) {
        if (o.ops < options.min_ops) continue;
        run.push_back(TuningSample{entry.op, entry.dtype_class, entry.group_size, p.bytes,
                                   o.backend, o.p50_us, entry.hosts, entry.ranks_per_host,
                                   entry.form, 0, "run"});
      }
    }
    std::vector<TuningSample> inputs = run;
    for (const auto& s : built_from) {
      if (!run_sizes.contains(s.bytes)) inputs.push_back(s);
    }
    const auto rebuilt = build_entries(inputs, hysteresis);
    TuningEntry& target = result.table.entries[index];
    target.ranges = rebuilt.front().ranges;
    std::set<std::size_t> tuned_sizes;
    for (const auto& s : built_from) {
      if (!run_sizes.contains(s.bytes)) tuned_sizes.insert(s.bytes);
    }
    for (const auto bytes : tuned_sizes) {
      const auto* was = backend_at(entry, bytes);
      const auto* now = backend_at(target, bytes);
      if (was != nullptr && now != nullptr && *was != *now) {
        result.shifted.push_back(ShiftedSize{entry.op, entry.dtype_class, entry.group_size,
                                             entry.topology(), entry.form, bytes, *was, *now});
      }
    }
    for (const auto id : point_ids) {
      auto& p = result.points[id];
      if (const auto* b = backend_at(target, p.bytes)) p.after = *b;
    }
    // Earlier run medians at these sizes give way to the new ones; tuned samples all stay.
    std::erase_if(result.table.samples, [&](const TuningSample& s) {
      return s.source == "run" && same_key(s, entry) && run_sizes.contains(s.bytes);
    });
    result.table.samples.insert(result.table.samples.end(), run.begin(), run.end());
    ++result.entries_refined;
  }

  std::size_t refined_points = 0;
  for (const auto& p : result.points)
    refined_points += p.after.empty() ? 0 : 1;
  result.table.provenance["refined"] = fmt::format(
      "{} of {} (op, size) points from the run medians of {} (at least {} operations per "
      "backend; hysteresis {}); {} entries rebuilt",
      refined_points, result.points.size(), paths, options.min_ops, hysteresis,
      result.entries_refined);
  if (!options.command.empty()) result.table.provenance["refine_command"] = options.command;
  return result;
}

}  // namespace mcr::bench
