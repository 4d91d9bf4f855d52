// Output of `mcr tune`: the checked table file, the entries, progress lines and the plots.
#include "tune_print.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "bench_plot.hpp"
#include "mcr/bench.hpp"
#include "mcr/errors.hpp"

namespace mcr::cli {

int validate_table_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument(fmt::format("--validate '{}': the file cannot be opened", path));
  std::stringstream ss;
  ss << in.rdbuf();
  const auto problems = bench::validate_table_text(ss.str());
  if (problems.empty()) {
    const auto t = TuningTable::parse_json(ss.str());
    std::size_t ranges = 0;
    for (const auto& e : t.entries)
      ranges += e.ranges.size();
    fmt::print("{}: valid tuning table (version {}, {} entries, {} ranges, {} samples)\n", path,
               t.version, t.entries.size(), ranges, t.samples.size());
    return 0;
  }
  fmt::print("{}: {} problem{}\n", path, problems.size(), problems.size() == 1 ? "" : "s");
  for (const auto& p : problems)
    fmt::print("  {}\n", p);
  return 1;
}

void print_entries(const TuningTable& t) {
  fmt::print("{:<15} {:<6} {:>5} {:>8} {:<5}  ranges (bytes: backend)\n", "op", "dtype", "ranks",
             "topology", "form");
  for (const auto& e : t.entries) {
    std::string ranges;
    for (const auto& r : e.ranges) {
      ranges += fmt::format(
          "{}[{}, {}]: {}", ranges.empty() ? "" : "  ", r.min_bytes,
          r.max_bytes == kMaxBytes ? std::string("inf") : std::to_string(r.max_bytes), r.backend);
    }
    const std::string shape = e.hosts != 0 || e.ranks_per_host != 0 ? e.topology() : "any";
    fmt::print("{:<15} {:<6} {:>5} {:>8} {:<5}  {}\n", to_string(e.op), e.dtype_class, e.group_size,
               shape, e.form, ranges);
  }
}

void print_refined_points(const std::vector<bench::RefinedPoint>& points) {
  fmt::print(
      "{:<15} {:<6} {:>5} {:<5} {:<5} {:>10}  {:<8} {:<8}  run medians (backend: p50 us, ops)\n",
      "op", "dtype", "ranks", "hosts", "form", "bytes", "before", "after");
  for (const auto& p : points) {
    std::string medians;
    for (const auto& o : p.observed) {
      medians +=
          fmt::format("{}{}: {:.1f}, {}", medians.empty() ? "" : "; ", o.backend, o.p50_us, o.ops);
    }
    // hosts: the group's shape by the trace's host map (for a whole job in a trace without one,
    // the table's), "-" where unknown.
    const std::string hosts = p.shape.hosts == 0 ? "-" : describe(p.shape);
    fmt::print("{:<15} {:<6} {:>5} {:<5} {:<5} {:>10}  {:<8} {:<8}  {}\n", to_string(p.op),
               p.dtype_class, p.group_size, hosts, p.form, p.bytes,
               p.before.empty() ? "-" : p.before, p.after.empty() ? "-" : p.after, medians);
    if (!p.note.empty()) fmt::print("{:>15} not refined: {}\n", "", p.note);
  }
}

void print_shifted_sizes(const std::vector<bench::ShiftedSize>& shifted) {
  if (shifted.empty()) return;
  fmt::print(
      "tuned sizes the traces do not show whose backend changed (the walk's hysteresis carried a "
      "refined neighbour's winner over a near tie, or let one go):\n");
  for (const auto& s : shifted) {
    fmt::print("{:<15} {:<6} {:>5} {:<14} {:<5} {:>10}  {} -> {}\n", to_string(s.op), s.dtype_class,
               s.group_size, s.topology, s.form, s.bytes, s.before, s.after);
  }
}

// Rank 0: a backend that gave wrong values (always), then the point's timings (unless quiet).
void print_tune_point(const bench::TunePoint& p, bool quiet) {
  std::string line;
  for (const auto& r : p.timings) {
    if (!r.supported) continue;
    if (r.wrong > 0) {
      fmt::print(stderr, "mcr tune: {} on {} at {} bytes: {} wrong values; not used\n",
                 to_string(p.op), r.backend, p.bytes, r.wrong);
      continue;
    }
    line += fmt::format(" {}={:.2f}us", r.backend, r.seconds * 1e6);
  }
  if (!quiet) {
    const std::string form = p.in_flight > 1 ? fmt::format("{}x{}", to_string(p.form), p.in_flight)
                                             : std::string(to_string(p.form));
    fmt::print(stderr, "[{:>4}/{}] {:>6.1f}s {}{:<15} {:<5} {:<8} {:>10} B:{}\n", p.index, p.total,
               p.elapsed_s, p.group.empty() ? "" : fmt::format("({}) ", p.group), to_string(p.op),
               p.dtype_class, form, p.bytes, line);
  }
}

void plot_next_to(const TuningTable& table, const std::string& output, const std::string& format) {
  const auto prefix =
      output.size() > 5 && output.ends_with(".json") ? output.substr(0, output.size() - 5) : output;
  try {
    for (const auto& img : plot_table(table, prefix, format))
      fmt::print("mcr tune: plot {}\n", img);
  } catch (const Error& e) {
    fmt::print(stderr, "mcr tune: {}\n", e.what());
  }
}

}  // namespace mcr::cli
