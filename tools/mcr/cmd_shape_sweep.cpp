// `mcr shape sweep`: one dimension of a model varied over a range; the throughput curve as a
// table, a CSV and a plot.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <fstream>
#include <memory>
#include <utility>

#include "bench_plot.hpp"
#include "commands.hpp"
#include "mcr/codesign/advisor.hpp"
#include "mcr/codesign/report.hpp"
#include "mcr/errors.hpp"
#include "shape_options.hpp"
#include "shape_plot.hpp"
#include "shape_print.hpp"

namespace mcr::cli {
namespace {

using namespace codesign;

struct SweepOptions {
  ModelFlags model;
  std::string device = "a100-80gb";
  bool training = false;
  std::string field = "h";
  std::int64_t from = 0, to = 0, step = 64;
  std::string out;
  std::string plot_format = "png";
};

void run_sweep(const SweepOptions& o) {
  // Before anything is written: the plot comes after the CSV, which a bad format overwrote.
  check_plot_format(o.plot_format);
  const ModelShape model = build_model(o.model);
  const DeviceSpec device = resolve_device(o.device);
  // An expert width of 0 means d_ff: the sweep starts at the width the experts have.
  const std::int64_t own =
      o.field == "d_ff_expert" ? model.expert_width() : get_dimension(model, o.field);
  const std::int64_t from = o.from > 0 ? o.from : own;
  const std::int64_t to = o.to > 0 ? o.to : from;
  const auto points = sweep(model, device, o.training, o.field, from, to, o.step);
  const std::string prefix = o.out.empty() ? fmt::format("shape-sweep-{}", o.field) : o.out;
  const std::string csv_path = prefix + ".csv";
  {
    std::ofstream csv(csv_path);
    if (!csv) throw Error(fmt::format("cannot write '{}'", csv_path));
    csv << sweep_csv(o.field, points);
    csv.close();  // the buffered rest is written here: a full disk shows now
    if (!csv) throw Error(fmt::format("failed writing '{}'", csv_path));
  }
  fmt::print("Sweep of {} for {} on {}\n{}", o.field, describe_model(model), device.name,
             format_sweep(o.field, points));
  fmt::print("CSV written to {}\n", csv_path);
  plot_sweep(o.field, points, prefix, o.plot_format, model.name, device.name);
}

}  // namespace

void add_shape_sweep_command(CLI::App* shape) {
  auto* sw =
      shape->add_subcommand("sweep", "vary one dimension; write the throughput curve (CSV, plot)");
  auto sopts = std::make_shared<SweepOptions>();
  add_model_options(sw, sopts->model);
  sw->add_option("--device", sopts->device, "catalog name or device JSON file")
      ->capture_default_str();
  sw->add_flag("--training", sopts->training, "include backward GEMMs");
  sw->add_option("--vary", sopts->field,
                 "h, a, a_kv, L, v, s, b, d_ff, d_ff_expert, t, experts, top_k")
      ->capture_default_str();
  auto* from = sw->add_option("--from", sopts->from, "first value (default: the model's)");
  auto* to = sw->add_option("--to", sopts->to, "last value, inclusive (default: --from)");
  sw->add_option("--step", sopts->step, "step")->capture_default_str();
  sw->add_option("--out", sopts->out, "output prefix (default shape-sweep-<field>)");
  sw->add_option("--plot-format", sopts->plot_format, "png or svg (needs gnuplot on PATH)")
      ->capture_default_str();
  sw->callback([sopts, from, to] {
    // Positive when given: 0 or less used to fall back to the default silently.
    for (const auto& [flag, value] : {std::pair{from, sopts->from}, std::pair{to, sopts->to}}) {
      if (flag->count() > 0 && value <= 0) {
        throw InvalidArgument(fmt::format("{} = {}: must be a positive {} (omit it for {})",
                                          flag->get_name(), value, sopts->field,
                                          flag == from ? "the model's value" : "--from's value"));
      }
    }
    run_sweep(*sopts);
  });
}

}  // namespace mcr::cli
