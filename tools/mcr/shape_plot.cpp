// `mcr shape sweep`'s plot: a gnuplot script beside the CSV, rendered when gnuplot is on PATH;
// otherwise a text plot.
#include "shape_plot.hpp"

#include <fmt/core.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "mcr/errors.hpp"
#include "shape_print.hpp"

namespace mcr::cli {
namespace {

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    std::error_code ec;
    const auto candidate = std::filesystem::path(dir) / program;
    if (std::filesystem::is_regular_file(candidate, ec)) return true;
  }
  return false;
}

}  // namespace

void plot_sweep(const std::string& field, const std::vector<codesign::SweepPoint>& points,
                const std::string& prefix, const std::string& format, const std::string& model_name,
                const std::string& device_name) {
  const std::string csv_path = prefix + ".csv";
  if (format != "png" && format != "svg") {
    throw InvalidArgument(
        fmt::format("--plot-format '{}' is not supported: use png or svg", format));
  }
  if (!on_path("gnuplot")) {
    fmt::print("{}gnuplot is not on PATH: text plot above; the CSV has the curve\n",
               ascii_plot(field, points));
    return;
  }
  const std::string plot_path = prefix + "." + format;
  const std::string script_path = prefix + ".gp";
  {
    std::ofstream gp(script_path);
    gp << fmt::format(
        "set terminal {} size 900,500\nset output '{}'\nset datafile separator ','\n"
        "set key autotitle columnhead\nset xlabel '{}'\nset ylabel 'predicted TFLOP/s per GPU'\n"
        "set title 'mcr shape sweep: {} on {}'\nset grid\n"
        "plot '{}' using 1:($2==1?$5:1/0) with linespoints title 'layer', "
        "'' using 1:($2==1?$6:1/0) with linespoints title 'model'\n",
        format == "png" ? "pngcairo" : "svg", plot_path, field, model_name, device_name, csv_path);
  }
  const std::string command = fmt::format("gnuplot '{}'", script_path);
  if (std::system(command.c_str()) != 0) {
    fmt::print("gnuplot failed: no plot rendered (script kept at {})\n", script_path);
    return;
  }
  fmt::print("Plot written to {}\n", plot_path);
}

}  // namespace mcr::cli
