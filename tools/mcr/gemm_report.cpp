#include "gemm_report.hpp"

#include <fmt/core.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "mcr/errors.hpp"

namespace mcr::cli {
namespace {

std::string quote_if_needed(const std::string& s) {
  if (!s.empty() && s.find_first_of(" \t'\"$`\\") == std::string::npos) return s;
  std::string q = "'";
  for (char c : s)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string number_or_na(double v, const char* format) {
  return std::isnan(v) ? std::string("n/a") : fmt::format(fmt::runtime(format), v);
}

std::string dims(const codesign::Gemm& g) {
  return fmt::format("{:>6} {:>6} {:>6} {:>5}", g.m, g.n, g.k, g.batch);
}

}  // namespace

std::string rerun_command(const CLI::App& subcommand) {
  std::string out = "mcr " + subcommand.get_name();
  for (const CLI::Option* opt : subcommand.get_options()) {
    if (opt->count() == 0 || opt->get_name() == "--help") continue;
    std::string name;
    if (!opt->get_lnames().empty()) {
      name = "--" + opt->get_lnames().front();
    } else if (!opt->get_snames().empty()) {
      name = "-" + opt->get_snames().front();
    }
    if (opt->get_items_expected_max() == 0) {  // a flag: its presence is the value
      out += " " + name;
      continue;
    }
    for (const auto& value : opt->results()) {
      out +=
          name.empty() ? " " + quote_if_needed(value) : " " + name + " " + quote_if_needed(value);
    }
  }
  return out;
}

void print_measurements_table(std::FILE* out, const codesign::bench::MeasurementSet& set) {
  fmt::print(out, "# backend: {}\n", set.backend_description);
  fmt::print(out, "{:<28} {:>6} {:>6} {:>6} {:>5} {:>5} {:>12} {:>10} {:>9} {:>7}\n", "role", "m",
             "n", "k", "batch", "dtype", "median_us", "TFLOP/s", "GB/s", "samples");
  for (const auto& r : set.rows) {
    fmt::print(out, "{:<28} {} {:>5} {:>12.2f} {:>10.4f} {:>9.2f} {:>7}\n", r.gemm.role,
               dims(r.gemm), to_string(r.gemm.dtype), r.timing.median_s * 1e6, r.tflops(), r.gbs(),
               r.timing.samples);
  }
}

void print_summary_line(std::FILE* out, const char* label,
                        const codesign::bench::ComparisonSummary& s) {
  fmt::print(out, "{}: {} GEMMs, median |error| {}%, median ratio {}, Spearman {}\n", label,
             s.count, number_or_na(s.median_abs_pct_error, "{:.1f}"),
             number_or_na(s.median_ratio, "{:.3f}"), number_or_na(s.spearman, "{:.3f}"));
}

void print_comparison_table(std::FILE* out, const codesign::bench::MeasurementSet& set,
                            std::span<const codesign::bench::ComparisonRow> rows,
                            const std::string& device_name) {
  fmt::print(out, "# backend: {}\n# predicted on device: {}\n", set.backend_description,
             device_name);
  fmt::print(out, "{:<28} {:>6} {:>6} {:>6} {:>5} {:>5} {:>12} {:>10} {:>10} {:>7} {:>7}\n", "role",
             "m", "n", "k", "batch", "dtype", "median_us", "meas_TF/s", "pred_TF/s", "ratio",
             "err_%");
  for (const auto& r : rows) {
    const auto& g = r.measured.gemm;
    fmt::print(out, "{:<28} {} {:>5} {:>12.2f} {:>10.4f} {:>10.4f} {:>7.3f} {:>7.1f}\n", g.role,
               dims(g), to_string(g.dtype), r.measured.timing.median_s * 1e6, r.measured_tflops,
               r.predicted_tflops, r.ratio, r.abs_pct_error);
  }
  print_summary_line(out, "summary", codesign::bench::summarize(rows));
}

void print_calibration(std::FILE* out, const codesign::bench::CalibrationResult& r,
                       const codesign::DeviceSpec& before_device) {
  const auto& before = before_device.efficiency;
  fmt::print(out, "calibration of '{}': seed {}, {} points fitted, {} held out, {} evaluations{}\n",
             r.device.name, r.seed, r.train_count, r.holdout_count, r.evaluations,
             r.duplicate_rows > 0
                 ? fmt::format(" ({} rows left out: their shape came earlier)", r.duplicate_rows)
                 : std::string());
  print_summary_line(out, "  fitted   before", r.train_before);
  print_summary_line(out, "  fitted   after ", r.train_after);
  if (r.holdout_count > 0) {
    print_summary_line(out, "  held-out before", r.holdout_before);
    print_summary_line(out, "  held-out after ", r.holdout_after);
  }
  const auto& a = r.device.efficiency;
  // One row per efficiency parameter, named as in --json: the value before and after, the interval
  // the data support (moving the value alone within it costs at most 1% of the fit), and why a
  // value was not fitted.
  fmt::print(out, "  {:<28} {:>10} {:>10}  {:<23} {}\n", "parameter", "before", "after",
             "supported interval", "note");
  int at_edge = 0, at_prior = 0;
  const auto row = [&](const std::string& name, double before_value, double after_value) {
    std::string interval = "-", note;
    const auto fitted = std::find_if(r.fitted.begin(), r.fitted.end(),
                                     [&](const auto& f) { return f.name == name; });
    if (fitted != r.fitted.end() && fitted->identified) {
      interval = fmt::format("[{:.4g}, {:.4g}]", fitted->low, fitted->high);
      if (fitted->at_bound) {
        note = "AT THE EDGE of its range (the data push past it)";
        ++at_edge;
      }
    } else {
      const auto prior = std::find_if(r.unidentified.begin(), r.unidentified.end(),
                                      [&](const auto& u) { return u.rfind(name + ": ", 0) == 0; });
      if (std::find(r.fixed.begin(), r.fixed.end(), name) != r.fixed.end()) {
        note = "held at its starting value (--fix)";
      } else if (prior != r.unidentified.end()) {
        note = "left at prior: " + prior->substr(name.size() + 2);
        ++at_prior;
      } else {
        note = "reference, not fitted";
      }
    }
    fmt::print(out, "  {:<28} {:>10.4g} {:>10.4g}  {:<23} {}\n", name, before_value, after_value,
               interval, note);
  };
  row("peak_fraction", before.peak_fraction, a.peak_fraction);
  row("k_overhead", before.k_overhead, a.k_overhead);
  row("launch_overhead_s", before.launch_overhead_s, a.launch_overhead_s);
  row("latency_floor_s", before.latency_floor_s, a.latency_floor_s);
  row("memory_efficiency", before.memory_efficiency, a.memory_efficiency);
  for (std::size_t i = 0; i < a.alignment_tiers.size() && i < before.alignment_tiers.size(); ++i) {
    row(fmt::format("alignment_tiers[{}B].factor", a.alignment_tiers[i].min_bytes),
        before.alignment_tiers[i].factor, a.alignment_tiers[i].factor);
  }
  for (std::size_t i = 0; i < r.device.tiles.size() && i < before_device.tiles.size(); ++i) {
    const auto& t = r.device.tiles[i];
    row(fmt::format("tiles[{}x{}].efficiency", t.m, t.n), before_device.tiles[i].efficiency,
        t.efficiency);
  }
  fmt::print(out, "  {} fitted ({} at the edge of their range), {} left at prior\n",
             r.fitted.size() - static_cast<std::size_t>(
                                   std::count_if(r.fitted.begin(), r.fitted.end(),
                                                 [](const auto& f) { return !f.identified; })),
             at_edge, at_prior);
}

void print_progress(std::size_t i, std::size_t total, const codesign::bench::GemmMeasurement& m) {
  static const bool tty = isatty(fileno(stderr)) != 0;
  const auto& g = m.gemm;
  fmt::print(stderr, "{}[{:>4}/{}] {} m={} n={} k={} batch={} {}: {:.2f} us, {:.4f} TFLOP/s{}",
             tty ? "\r\033[K" : "", i + 1, total, g.role, g.m, g.n, g.k, g.batch,
             to_string(g.dtype), m.timing.median_s * 1e6, m.tflops(),
             tty && i + 1 < total ? "" : "\n");
  std::fflush(stderr);
}

void print_skipped(const codesign::bench::MeasurementSet& set) {
  for (const auto& k : set.skipped) {
    fmt::print(stderr, "mcr gemm: skipped {} m={} n={} k={} batch={} {}: {}\n", k.gemm.role,
               k.gemm.m, k.gemm.n, k.gemm.k, k.gemm.batch, to_string(k.gemm.dtype), k.reason);
  }
}

void print_dry_run(const codesign::bench::MeasurementSet& set) {
  fmt::print("{} GEMMs would run on {}\n", set.rows.size(), set.backend_description);
  for (const auto& r : set.rows) {
    const auto& g = r.gemm;
    fmt::print("{} m={} n={} k={} batch={} {} ({:.3g} GFLOP)\n", g.role, g.m, g.n, g.k, g.batch,
               to_string(g.dtype), g.flops() / 1e9);
  }
}

void write_table(const std::string& path, const codesign::bench::MeasurementSet& set,
                 const std::vector<codesign::bench::ComparisonRow>* comparison) {
  std::FILE* out = stdout;
  if (!path.empty() && path != "-") {
    out = std::fopen(path.c_str(), "w");
    if (!out) throw Error(fmt::format("-o: cannot write '{}'", path));
  }
  if (comparison) {
    print_comparison_table(out, set, *comparison, set.device->name);
  } else {
    print_measurements_table(out, set);
  }
  // A full disk shows when the buffered rest is written: at the flush and close, checked here (a
  // truncated table was left with exit status 0).
  const bool written = std::fflush(out) == 0 && !std::ferror(out);
  const bool closed = out == stdout || std::fclose(out) == 0;
  if (!written || !closed) {
    throw Error(fmt::format("-o: failed writing '{}': {}", path.empty() ? "-" : path,
                            std::strerror(errno)));
  }
}

void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() ||
        std::fflush(stdout) != 0) {
      throw Error(fmt::format("-o: failed writing to stdout: {}", std::strerror(errno)));
    }
    return;
  }
  std::ofstream file(path);
  if (!file) throw Error(fmt::format("-o: cannot write '{}'", path));
  file << text;
  file.close();  // the last buffered bytes are written here: a full disk shows now
  if (!file) throw Error(fmt::format("-o: failed writing '{}'", path));
}

}  // namespace mcr::cli
