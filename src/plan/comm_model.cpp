#include "mcr/plan/comm_model.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "mcr/comm/bandwidth.hpp"
#include "mcr/comm/info.hpp"
#include "mcr/errors.hpp"

namespace mcr::plan {

namespace {

OpType op_type(Collective c) {
  switch (c) {
    case Collective::all_reduce:
      return OpType::all_reduce;
    case Collective::all_gather:
      return OpType::all_gather;
    case Collective::reduce_scatter:
      return OpType::reduce_scatter;
    case Collective::p2p:
      return OpType::send;
    case Collective::all_to_all:
      return OpType::all_to_all;
  }
  return OpType::all_reduce;
}

/// all_to_all of `bytes` per rank: each rank keeps 1/n and sends an equal share to every other;
/// the shares for ranks of the same node cross NVLink, the others the GPU's own adapter, at the
/// same time. One latency per peer on the slower path (pairwise exchange).
double all_to_all_time(double bytes, const Placement& p, const SystemSpec& s) {
  const double n = p.size;
  const double same_node = (p.per_node - 1.0) / n * bytes;
  const double other_nodes = (n - p.per_node) / n * bytes;
  double t = 0;
  if (p.per_node > 1) {
    t = same_node / s.intra.bytes_per_s() + (p.per_node - 1.0) * s.intra.latency_us * 1e-6;
  }
  if (p.nodes > 1) {
    t = std::max(
        t, other_nodes / s.inter.bytes_per_s() + (n - p.per_node) * s.inter.latency_us * 1e-6);
  }
  return t;
}

/// Latency steps of one phase: a ring inside a node, a tree (log2) between nodes, as NCCL does
/// for large groups.
double ring_steps(int n) {
  return n > 1 ? n - 1 : 0;
}
double tree_steps(int n) {
  return n > 1 ? std::ceil(std::log2(static_cast<double>(n))) : 0;
}

/// Time of one reduce-scatter or all-gather (`halves` = 1) or all-reduce (2) of `bytes` over the
/// placement: intra-node ring on the node's share, then inter-node among nodes.
double phased(double bytes, const Placement& p, const SystemSpec& s, int halves) {
  const int l = p.per_node;
  const int n_nodes = p.nodes;
  double t = 0;
  if (l > 1) {
    t += halves * ((l - 1.0) / l * bytes / s.intra.bytes_per_s() +
                   ring_steps(l) * s.intra.latency_us * 1e-6);
  }
  if (n_nodes > 1) {
    // After the intra-node phase each of the l ranks owns 1/l of the buffer and drives its own
    // adapter, so the inter-node phase moves bytes / l per GPU.
    t += halves * ((n_nodes - 1.0) / n_nodes * (bytes / l) / s.inter.bytes_per_s() +
                   tree_steps(n_nodes) * s.inter.latency_us * 1e-6);
  }
  return t;
}

struct Samples {
  std::vector<std::pair<double, double>> points;  ///< (bytes, seconds), sorted by bytes
  int group_size = 0;
};

Samples pick_samples(const TuningTable& t, OpType op, std::string_view dclass,
                     const std::string& backend, int ranks) {
  // Nearest measured group size; an exact dtype class beats another one.
  int best_size = -1;
  bool exact_class = false;
  // A run's latencies (`mcr tune --refine`, source "run") include the program's waits and load;
  // the model prices the library's own cost, which the tuned samples measure.
  for (const auto& s : t.samples) {
    if (s.op != op || s.backend != backend || !s.source.empty()) continue;
    const bool cls = s.dtype_class == dclass;
    const bool closer =
        best_size < 0 || std::abs(s.group_size - ranks) < std::abs(best_size - ranks);
    const bool same = best_size == s.group_size;
    if (closer || (same && cls && !exact_class)) {
      best_size = s.group_size;
      exact_class = cls;
    }
  }
  Samples out;
  out.group_size = best_size;
  for (const auto& s : t.samples) {
    if (s.op == op && s.backend == backend && s.group_size == best_size && s.source.empty() &&
        (s.dtype_class == dclass) == exact_class) {
      out.points.emplace_back(static_cast<double>(s.bytes), s.time_us * 1e-6);
    }
  }
  // Several dtypes of one class measured at the same size: one point, their mean time.
  std::sort(out.points.begin(), out.points.end());
  std::vector<std::pair<double, double>> merged;
  std::size_t same = 0;
  for (const auto& [bytes, secs] : out.points) {
    if (!merged.empty() && merged.back().first == bytes) {
      ++same;
      merged.back().second += (secs - merged.back().second) / static_cast<double>(same + 1);
    } else {
      merged.emplace_back(bytes, secs);
      same = 0;
    }
  }
  out.points = std::move(merged);
  return out;
}

/// Log-log interpolation between samples; beyond the largest, the time grows with the slope of
/// the last two samples (bandwidth-bound), never slower than proportional growth would predict
/// from a shrinking slope.
double interpolate(const std::vector<std::pair<double, double>>& pts, double bytes) {
  if (pts.size() == 1 || bytes <= pts.front().first) {
    return bytes <= pts.front().first
               ? pts.front().second
               : pts.front().second * bytes / std::max(1.0, pts.front().first);
  }
  if (bytes >= pts.back().first) {
    const auto& [b1, t1] = pts[pts.size() - 2];
    const auto& [b2, t2] = pts.back();
    const double slope = (t2 - t1) / (b2 - b1);
    const double linear = t2 + (bytes - b2) * slope;
    return slope > 0 ? linear : t2 * bytes / b2;
  }
  const auto hi = std::lower_bound(pts.begin(), pts.end(), std::make_pair(bytes, 0.0));
  const auto lo = hi - 1;
  const double x0 = std::log(std::max(1.0, lo->first)), x1 = std::log(hi->first);
  const double y0 = std::log(lo->second), y1 = std::log(hi->second);
  const double x = std::log(bytes);
  return std::exp(y0 + (y1 - y0) * (x - x0) / (x1 - x0));
}

}  // namespace

std::string to_string(Collective c) {
  switch (c) {
    case Collective::all_reduce:
      return "all_reduce";
    case Collective::all_gather:
      return "all_gather";
    case Collective::reduce_scatter:
      return "reduce_scatter";
    case Collective::p2p:
      return "p2p";
    case Collective::all_to_all:
      return "all_to_all";
  }
  return "?";
}

Placement place_group(int size, int stride, int gpus_per_node) {
  Placement p;
  p.size = size;
  if (stride >= gpus_per_node) {
    p.per_node = 1;
  } else {
    p.per_node = std::max(1, std::min(size, gpus_per_node / std::max(1, stride)));
  }
  p.nodes = (size + p.per_node - 1) / p.per_node;
  return p;
}

CommModel::CommModel(SystemSpec system, bool gpu_buffers)
    : system_(std::move(system)), gpu_buffers_(gpu_buffers) {}

void CommModel::add_table(Tier tier, TuningTable table) {
  // Latencies are interpolated in log space: a sample of no time (or less) would make every
  // interpolation through it NaN, and the step time with it.
  for (std::size_t i = 0; i < table.samples.size(); ++i) {
    const TuningSample& s = table.samples[i];
    if (!(s.time_us > 0)) {
      throw InvalidArgument(fmt::format(
          "comm.tables: samples[{}] ({} of {} bytes on {}) has time_us {}: a latency must be a "
          "positive number of microseconds",
          i, to_string(s.op), s.bytes, s.backend, s.time_us));
    }
  }
  if (tier == Tier::intra || tier == Tier::any) intra_ = table;
  if (tier == Tier::inter || tier == Tier::any) inter_ = std::move(table);
}

double CommModel::alpha_beta(Collective op, double bytes, const Placement& where) const {
  if (where.size <= 1 || bytes <= 0) return 0;
  if (op == Collective::p2p) {
    const Link& l = where.nodes > 1 ? system_.inter : system_.intra;
    return l.latency_us * 1e-6 + bytes / l.bytes_per_s();
  }
  if (op == Collective::all_to_all) return all_to_all_time(bytes, where, system_);
  return phased(bytes, where, system_, op == Collective::all_reduce ? 2 : 1);
}

std::optional<CommCost> CommModel::from_table(const TuningTable& table, const char* tier,
                                              Collective op, double bytes, const Placement& where,
                                              DType dtype, CallForm form) const {
  const OpType type = op_type(op);
  const int ranks = where.size;
  const auto size = static_cast<std::size_t>(std::max(0.0, bytes));
  const auto has = [&](const std::string& backend) {
    return std::any_of(table.samples.begin(), table.samples.end(),
                       [&](const TuningSample& s) { return s.op == type && s.backend == backend; });
  };
  // The runtime's selection (mcr::select_backend) over the backends of this build in their
  // default priority; a backend fits when the table can price the op on it (and, for nccl, when
  // the buffers are on the GPU, as the runtime's nccl backend requires).
  SelectionInputs in;
  in.rules = &rules_;
  in.table = &table;
  in.priority = backend_names();
  in.group_size = ranks;
  in.shape = HostShape{where.nodes, where.per_node};
  auto fit = [&](std::string_view name) -> BackendFit {
    if (name == "nccl" && !gpu_buffers_) return {true, "host buffers"};
    if (!has(std::string(name))) return {true, "no samples for the op in the table"};
    return {};
  };
  const auto considered = select_backend(in, fit, {type, dtype, size, form, {}});
  const std::string* chosen = chosen_backend(considered);
  if (chosen == nullptr) return std::nullopt;
  const std::string backend = *chosen;
  const std::string why(to_string(considered.back().source));
  const Samples s = pick_samples(table, type, dtype_class(dtype), backend, ranks);
  if (s.points.empty()) return std::nullopt;
  double t = interpolate(s.points, std::max(1.0, bytes));
  std::string scaled;
  if (s.group_size != ranks && s.group_size > 1) {
    t *= bus_factor(type, ranks) / bus_factor(type, s.group_size);
    scaled = fmt::format(", scaled from {} ranks", s.group_size);
  }
  return CommCost{t, backend, fmt::format("table:{} ({}{})", tier, why, scaled)};
}

CommCost CommModel::cost(Collective op, double bytes, const Placement& where, DType dtype,
                         CallForm form) const {
  if (where.size <= 1 || bytes <= 0) return {0, "none", "local"};
  const bool across = where.nodes > 1;
  const auto& table = across ? inter_ : intra_;
  if (table) {
    if (auto c = from_table(*table, across ? "inter" : "intra", op, bytes, where, dtype, form)) {
      return *c;
    }
  }
  return {alpha_beta(op, bytes, where), "alpha-beta", "alpha-beta"};
}

std::pair<Tier, std::string> parse_table_argument(const std::string& arg) {
  if (arg.rfind("intra=", 0) == 0) return {Tier::intra, arg.substr(6)};
  if (arg.rfind("inter=", 0) == 0) return {Tier::inter, arg.substr(6)};
  if (arg.empty())
    throw InvalidArgument("comm.tables has an empty entry: give FILE, intra=FILE or inter=FILE");
  return {Tier::any, arg};
}

}  // namespace mcr::plan
