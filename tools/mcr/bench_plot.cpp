// Rendering of a tuning table's latency matrix through gnuplot.
#include "bench_plot.hpp"

#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "gnuplot.hpp"
#include "mcr/errors.hpp"

namespace mcr::cli {

void check_plot_format(const std::string& format) {
  if (format != "png" && format != "svg") {
    throw InvalidArgument(fmt::format("--plot-format '{}': must be png or svg", format));
  }
}

std::vector<std::string> plot_table(const TuningTable& table, const std::string& prefix,
                                    const std::string& format) {
  check_plot_format(format);
  // op -> series -> (bytes -> us), for the first dtype class measured per op and the group that
  // the table's first sample measured (a multi-host table also holds hier's step groups). A table
  // of two call forms (tune --form both) gets a series per backend and form, "mpi (async)"; one
  // timed with several numbers in flight a series per number too, "mpi (async, 16 in flight)".
  std::map<std::string, std::map<std::string, std::map<std::size_t, double>>> series;
  std::map<std::string, std::string> klass;
  std::map<std::string, std::set<std::string>> forms;
  std::map<std::string, std::set<int>> depths;
  const int group = table.samples.empty() ? 0 : table.samples.front().group_size;
  for (const auto& s : table.samples) {
    const std::string op(to_string(s.op));
    if (s.group_size != group) continue;
    if (!klass.count(op)) klass[op] = s.dtype_class;
    if (klass[op] != s.dtype_class) continue;
    forms[op].insert(s.form);
    if (s.in_flight > 0) depths[op].insert(s.in_flight);
  }
  auto series_name = [&](const std::string& op, const std::string& backend, const std::string& form,
                         int in_flight) {
    if (depths[op].size() > 1 && in_flight > 0)
      return fmt::format("{} ({}, {} in flight)", backend, form, in_flight);
    return forms[op].size() > 1 ? fmt::format("{} ({})", backend, form) : backend;
  };
  for (const auto& s : table.samples) {
    const std::string op(to_string(s.op));
    if (s.group_size != group || klass[op] != s.dtype_class) continue;
    // A run's medians (`mcr tune --refine`) are their own series beside the tuned ones.
    const std::string run = s.source.empty() ? "" : fmt::format(" ({})", s.source);
    series[op][series_name(op, s.backend, s.form, s.in_flight) + run][s.bytes] = s.time_us;
  }
  std::ofstream gp(prefix + ".gp");
  if (!gp) throw Error(fmt::format("--plot: cannot write '{}.gp'", prefix));
  gp << (format == "png" ? "set terminal pngcairo size 900,600\n"
                         : "set terminal svg size 900,600\n");
  gp << "set logscale xy\nset xlabel 'message size (bytes)'\nset ylabel 'latency (us, median of "
        "max over ranks)'\n"
        "set key top left\nset grid\n";
  std::vector<std::string> images;
  for (const auto& [op, backends] : series) {
    if (backends.begin()->second.size() < 2)
      continue;  // one size (barrier): nothing to draw a line through
    const std::string dat = fmt::format("{}.{}.dat", prefix, op);
    std::ofstream d(dat);
    std::vector<std::string> plots;
    int index = 0;
    for (const auto& [backend, points] : backends) {
      d << "# " << backend << "\n";
      for (const auto& [bytes, us] : points)
        d << std::max<std::size_t>(bytes, 1) << ' ' << us << '\n';
      d << "\n\n";
      plots.push_back(fmt::format("{} index {} with linespoints title {}", gnuplot_file(dat),
                                  index++, gnuplot_quoted(backend)));
    }
    // The tuned choice: the chosen backend's latency at each measured size, per form measured.
    d << "# tuned\n";
    for (const std::string& form : forms[op]) {
      for (const auto& [bytes, unused] : backends.begin()->second) {
        // The table's choice for the communicator it was measured on.
        const TuningSample* first = table.samples.empty() ? nullptr : &table.samples.front();
        const auto* chosen =
            table.lookup(*parse_op(op), klass[op] == "int" ? DType::i32 : DType::f32,
                         first ? first->group_size : 0,
                         first ? HostShape{first->hosts, first->ranks_per_host} : HostShape{},
                         bytes, form == "async" ? CallForm::async : CallForm::sync);
        if (chosen == nullptr) continue;
        // Timed with several numbers in flight: the choice weighs them all (the worst slowdown
        // over them), so it is marked on the chosen backend's series of each.
        std::set<int> marked{0};
        if (form == "async" && depths[op].size() > 1) marked = depths[op];
        for (const int depth : marked) {
          auto it = backends.find(series_name(op, *chosen, form, depth));
          if (it != backends.end() && it->second.count(bytes)) {
            d << std::max<std::size_t>(bytes, 1) << ' ' << it->second.at(bytes) << '\n';
          }
        }
      }
    }
    plots.push_back(
        fmt::format("{} index {} with points pt 6 ps 2 lc rgb 'black' title 'tuned choice'",
                    gnuplot_file(dat), index));
    const std::string image = fmt::format("{}.{}.{}", prefix, op, format);
    gp << fmt::format("set output {}\nset title {}\nplot {}\n", gnuplot_file(image),
                      gnuplot_quoted(fmt::format("{} ({})", op, klass[op])),
                      fmt::join(plots, ", "));
    images.push_back(image);
  }
  gp.close();
  if (!gnuplot_on_path()) {
    throw Error(fmt::format(
        "--plot: gnuplot is not installed; the data and script are in {}.gp and {}.*.dat "
        "(install gnuplot, e.g. apt-get install gnuplot-nox, and run 'gnuplot {}.gp')",
        prefix, prefix, prefix));
  }
  if (run_gnuplot(prefix + ".gp") != 0) {
    throw Error(fmt::format("--plot: gnuplot failed on {}.gp", prefix));
  }
  return images;
}

}  // namespace mcr::cli
