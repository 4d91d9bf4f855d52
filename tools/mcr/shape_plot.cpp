// `mcr shape sweep`'s plot: a gnuplot script beside the CSV, rendered when gnuplot is on PATH;
// otherwise a text plot.
#include "shape_plot.hpp"

#include <fmt/core.h>

#include <fstream>

#include "gnuplot.hpp"
#include "mcr/errors.hpp"
#include "shape_print.hpp"

namespace mcr::cli {

void plot_sweep(const std::string& field, const std::vector<codesign::SweepPoint>& points,
                const std::string& prefix, const std::string& format, const std::string& model_name,
                const std::string& device_name) {
  const std::string csv_path = prefix + ".csv";
  if (!gnuplot_on_path()) {
    fmt::print("{}gnuplot is not on PATH: text plot above; the CSV has the curve\n",
               ascii_plot(field, points));
    return;
  }
  const std::string plot_path = prefix + "." + format;
  const std::string script_path = prefix + ".gp";
  {
    std::ofstream gp(script_path);
    if (!gp) throw Error(fmt::format("cannot write '{}'", script_path));
    // Every string is quoted for gnuplot: the model's name comes from a user's file.
    gp << fmt::format(
        "set terminal {} size 900,500\nset output {}\nset datafile separator ','\n"
        "set key autotitle columnhead\nset xlabel {}\nset ylabel 'predicted TFLOP/s per GPU'\n"
        "set title {}\nset grid\n"
        "plot {} using 1:($2==1?$5:1/0) with linespoints title 'layer', "
        "'' using 1:($2==1?$6:1/0) with linespoints title 'model'\n",
        format == "png" ? "pngcairo" : "svg", gnuplot_file(plot_path), gnuplot_quoted(field),
        gnuplot_quoted(fmt::format("mcr shape sweep: {} on {}", model_name, device_name)),
        gnuplot_file(csv_path));
  }
  if (run_gnuplot(script_path) != 0) {  // an error, as `mcr tune --plot` reports it
    throw Error(
        fmt::format("--plot-format: gnuplot failed on {}: no plot rendered (the CSV is "
                    "written)",
                    script_path));
  }
  fmt::print("Plot written to {}\n", plot_path);
}

}  // namespace mcr::cli
