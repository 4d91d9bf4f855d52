// `mcr tune --refine`: a tuning table's entries rebuilt where a program's MCR_LOG traces show
// several backends running the same operation at the same size, with the run's median latencies
// in place of the idle-rank figures at that size.
#include "mcr/bench/refine.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
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
  auto tie() const { return std::tie(op, group_size, form, bytes, dtype_class); }
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

// The shape a communicator of `group_size` ranks has, as far as the table can tell: the world's
// from the provenance; for a smaller group the one shape the table's entries for the op at that
// size name (hier's step groups are measured on one shape each). nullopt: several, undecidable.
std::optional<HostShape> group_shape(const TuningTable& t, OpType op, int group_size,
                                     std::string& note) {
  if (group_size == provenance_int(t, "ranks")) {
    return HostShape{provenance_int(t, "hosts"), provenance_int(t, "ranks_per_host")};
  }
  std::set<std::pair<int, int>> shapes;
  for (const auto& e : t.entries) {
    if (e.op == op && e.group_size == group_size) shapes.emplace(e.hosts, e.ranks_per_host);
  }
  if (shapes.size() <= 1) {
    return shapes.empty() ? HostShape{} : HostShape{shapes.begin()->first, shapes.begin()->second};
  }
  std::string names;
  for (const auto& [h, r] : shapes)
    names += fmt::format("{}{}", names.empty() ? "" : ", ", describe(HostShape{h, r}));
  note = fmt::format(
      "the table has entries for groups of {} ranks on {}; the trace does not say which this "
      "group is",
      group_size, names);
  return std::nullopt;
}

std::map<PointKey, Observations> observe(const std::vector<Trace>& traces) {
  std::map<PointKey, Observations> out;
  for (const auto& trace : traces) {
    for (const auto& op : trace.ops) {
      if (op.backend.empty() || !(op.latency_us > 0)) continue;
      const int group_size =
          op.group < 0 ? trace.world_size : static_cast<int>(trace.groups.at(op.group).size());
      const std::string klass = is_reduction(op.op) ? std::string(dtype_class(op.dtype)) : "any";
      auto& o = out[PointKey{op.op, klass, group_size, op.async ? "async" : "sync", op.bytes}];
      if (o.latencies.empty()) o.dtype = op.dtype;
      o.latencies[op.backend].push_back(op.latency_us);
    }
  }
  return out;
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
  const auto observed = observe(traces);
  if (observed.empty()) {
    std::string names;
    for (const auto& t : traces)
      names += fmt::format("{}{}", names.empty() ? "" : ", ", t.path);
    throw InvalidArgument(fmt::format(
        "refine: no operation with a backend and a latency in {} (MCR_LOG=trace writes them; an "
        "op list has neither)",
        names.empty() ? std::string("no trace") : names));
  }

  RefineResult result;
  result.table = table;
  // Entry index -> the points that refine it.
  std::map<std::size_t, std::vector<std::size_t>> by_entry;
  for (const auto& [key, obs] : observed) {
    RefinedPoint p{key.op, key.dtype_class, key.group_size, key.form, key.bytes, {}, {}, {}, {}};
    std::size_t qualified = 0;
    for (const auto& [backend, lat] : obs.latencies) {
      p.observed.push_back({backend, lat.size(), median(lat)});
      if (lat.size() >= options.min_ops) ++qualified;
    }
    std::sort(p.observed.begin(), p.observed.end(),
              [](const auto& a, const auto& b) { return a.p50_us < b.p50_us; });
    const CallForm form = key.form == "async" ? CallForm::async : CallForm::sync;
    const auto shape = group_shape(table, key.op, key.group_size, p.note);
    const TuningEntry* entry =
        shape ? table.entry_for(key.op, obs.dtype, key.group_size, *shape, form) : nullptr;
    if (entry != nullptr) {
      if (const auto* b = backend_at(*entry, key.bytes)) p.before = *b;
    }
    if (!p.note.empty()) {
      // group_shape() said why
    } else if (entry == nullptr) {
      p.note = fmt::format("the table has no entry for {} on {} ranks ({})", to_string(key.op),
                           key.group_size, describe(*shape));
    } else if (qualified < 2) {
      p.note = fmt::format("fewer than two backends ran it {} times or more: nothing to compare",
                           options.min_ops);
    } else {
      by_entry[static_cast<std::size_t>(entry - table.entries.data())].push_back(
          result.points.size());
    }
    result.points.push_back(std::move(p));
  }

  for (const auto& [index, point_ids] : by_entry) {
    const TuningEntry& entry = table.entries[index];
    std::vector<TuningSample> tuned;
    for (const auto& s : table.samples) {
      if (same_key(s, entry)) tuned.push_back(s);
    }
    std::string refused;
    if (tuned.empty()) {
      refused = "its entry has no samples to rebuild it from";
    } else {
      const auto rebuilt = build_entries(tuned, hysteresis);
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
    // The run's medians replace every tuned figure at the sizes the run shows.
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
    for (const auto& s : tuned) {
      if (!run_sizes.contains(s.bytes)) inputs.push_back(s);
    }
    auto rebuilt = build_entries(inputs, hysteresis);
    TuningEntry& target = result.table.entries[index];
    target.ranges = rebuilt.front().ranges;
    for (const auto id : point_ids) {
      auto& p = result.points[id];
      if (const auto* b = backend_at(target, p.bytes)) p.after = *b;
    }
    result.table.samples.insert(result.table.samples.end(), run.begin(), run.end());
    ++result.entries_refined;
  }

  std::size_t refined_points = 0;
  for (const auto& p : result.points)
    refined_points += p.after.empty() ? 0 : 1;
  std::string paths;
  for (const auto& t : traces)
    paths += fmt::format("{}{}", paths.empty() ? "" : ", ", t.path);
  result.table.provenance["refined"] = fmt::format(
      "{} of {} (op, size) points from the run medians of {} (at least {} operations per "
      "backend; hysteresis {}); {} entries rebuilt",
      refined_points, result.points.size(), paths, options.min_ops, hysteresis,
      result.entries_refined);
  if (!options.command.empty()) result.table.provenance["refine_command"] = options.command;
  return result;
}

}  // namespace mcr::bench
