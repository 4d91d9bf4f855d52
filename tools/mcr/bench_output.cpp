// Text, CSV and JSON output of `mcr bench` and `mcr bench --compare-auto`.
#include "bench_output.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "mcr/bench/measure.hpp"
#include "mcr/errors.hpp"
#include "output_path.hpp"

namespace mcr::cli {

nlohmann::json to_json(const BenchRow& r) {
  return {{"op", std::string(to_string(r.op))},
          {"dtype", std::string(to_string(r.dtype))},
          {"bytes", r.bytes},
          {"count", r.count},
          {"root", r.root < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.root)},
          {"in_place", r.in_place},
          {"async", r.async},
          {"requested_backend", r.requested},
          {"backend", r.backend},
          {"iterations", r.iterations},
          {"time_us", r.time_us},
          {"algbw_gbps", r.algbw_gbps},
          {"busbw_gbps", r.busbw_gbps},
          {"wrong", r.wrong}};
}

RowPrinter::RowPrinter(Format format, std::string time_reduce, int ranks, std::FILE* out)
    : format_(format), out_(out), time_reduce_(std::move(time_reduce)), ranks_(ranks) {}

void RowPrinter::add(const BenchRow& r) {
  const std::string backend = r.requested == "auto" ? "auto:" + r.backend : r.backend;
  const std::string root = r.root < 0 ? "-" : std::to_string(r.root);
  switch (format_) {
    case Format::json:
      rows_.push_back(to_json(r));
      return;
    case Format::csv:
      if (!header_done_) {
        fmt::print(out_,
                   "size,count,type,op,root,place,backend,time_us,algbw_gbps,busbw_gbps,wrong\n");
        header_done_ = true;
      }
      fmt::print(out_, "{},{},{},{},{},{},{},{:.3f},{:.4f},{:.4f},{}\n", r.bytes, r.count,
                 to_string(r.dtype), to_string(r.op), root, r.in_place ? "in" : "out", backend,
                 r.time_us, r.algbw_gbps, r.busbw_gbps, r.wrong);
      break;
    case Format::text:
      if (!header_done_) {
        fmt::print(
            out_,
            "# {} ranks; time = {} over ranks of the mean per iteration; algbw/busbw in GB/s\n",
            ranks_, time_reduce_);
        fmt::print(out_,
                   "# {:>12} {:>11} {:>5} {:<15} {:>4} {:>5} {:<10} {:>11} {:>8} {:>8} {:>7}\n",
                   "size", "count", "type", "op", "root", "place", "backend", "time_us", "algbw",
                   "busbw", "#wrong");
        header_done_ = true;
      }
      fmt::print(
          out_,
          "  {:>12} {:>11} {:>5} {:<15} {:>4} {:>5} {:<10} {:>11.2f} {:>8.3f} {:>8.3f} {:>7}\n",
          r.bytes, r.count, to_string(r.dtype), to_string(r.op), root, r.in_place ? "in" : "out",
          backend, r.time_us, r.algbw_gbps, r.busbw_gbps, r.wrong);
      break;
  }
  std::fflush(out_);
}

void RowPrinter::finish() {
  if (format_ == Format::json)
    fmt::print(out_, "{}\n",
               nlohmann::json{{"ranks", ranks_}, {"time", time_reduce_}, {"rows", rows_}}.dump(2));
}

std::string compare_header(const bench::CompareOptions& o, int ranks,
                           const std::vector<std::string>& backends) {
  std::string out = fmt::format(
      "# auto vs every backend, {} ranks, {}, {}, {}-{} rounds interleaved, then auto and the "
      "best until the ratio is within {:.1f}% (95%) or {} s more; ratio = median over rounds of "
      "best/auto, times max-across-ranks\n",
      ranks, o.async ? "i* forms" : "blocking calls", o.in_place ? "in place" : "out of place",
      o.repetitions, std::max(o.repetitions, bench::kCompareMaxRepetitions), o.precision * 100,
      o.extra_budget_s);
  std::string head =
      fmt::format("# {:<15} {:>5} {:>10} {:<6} {:>10}", "op", "type", "size", "auto", "auto_us");
  for (const auto& b : backends)
    head += fmt::format(" {:>10}", b + "_us");
  out += fmt::format("{} {:<6} {:>7} {:>15} {:>5} {:>6}\n", head, "best", "ratio", "ci95", "pairs",
                     ">=" + fmt::format("{:.2f}", o.min_ratio));
  return out;
}

std::string compare_line(const bench::ComparePoint& p) {
  const auto& t = p.timings;
  std::string line =
      fmt::format("  {:<15} {:>5} {:>10} {:<6} {:>10.2f}", to_string(p.op), to_string(p.dtype),
                  p.bytes, p.auto_backend, t.empty() ? 0.0 : t[0].seconds * 1e6);
  for (std::size_t v = 1; v < t.size(); ++v) {
    line += t[v].supported ? fmt::format(" {:>10.2f}", t[v].seconds * 1e6)
                           : fmt::format(" {:>10}", "-");
  }
  return fmt::format("{} {:<6} {:>7.3f} {:>15} {:>5} {:>6}\n", line, p.best_backend(),
                     p.ratio.median, fmt::format("[{:.3f},{:.3f}]", p.ratio.low, p.ratio.high),
                     p.ratio.pairs, p.met ? "yes" : "NO");
}

nlohmann::json to_json(const bench::ComparePoint& p, const std::vector<std::string>& backends) {
  const auto& t = p.timings;
  nlohmann::json j{{"op", std::string(to_string(p.op))},
                   {"dtype", std::string(to_string(p.dtype))},
                   {"bytes", p.bytes},
                   {"auto_backend", p.auto_backend},
                   {"auto_us", t.empty() ? 0.0 : t[0].seconds * 1e6},
                   {"best_backend", p.best_backend()},
                   {"best_us", p.best_seconds() * 1e6},
                   {"ratio", p.ratio.median},
                   {"ratio_ci95", {p.ratio.low, p.ratio.high}},
                   {"pairs", p.ratio.pairs}};
  for (std::size_t v = 1; v < t.size() && v <= backends.size(); ++v) {
    j[backends[v - 1] + "_us"] =
        t[v].supported ? nlohmann::json(t[v].seconds * 1e6) : nlohmann::json(nullptr);
  }
  return j;
}

struct OutputFile::Stream {
  std::string path;
  std::string flag;
  std::FILE* memory = nullptr;  // open_memstream's: `buffer` and `size` are its, at fixed addresses
  char* buffer = nullptr;
  std::size_t size = 0;
};

OutputFile::OutputFile(std::string path, std::string flag) : stream_(std::make_unique<Stream>()) {
  stream_->path = std::move(path);
  stream_->flag = std::move(flag);
  stream_->memory = ::open_memstream(&stream_->buffer, &stream_->size);
  if (stream_->memory == nullptr) {
    throw Error(fmt::format("{} '{}': open_memstream failed: {}", stream_->flag, stream_->path,
                            std::strerror(errno)));
  }
}

OutputFile::~OutputFile() {
  if (!stream_) return;
  if (stream_->memory != nullptr) (void)std::fclose(stream_->memory);
  std::free(stream_->buffer);
}

std::FILE* OutputFile::get() const noexcept {
  return stream_ ? stream_->memory : nullptr;
}

void OutputFile::commit() {
  if (!stream_ || stream_->memory == nullptr) return;
  const int closed = std::fclose(stream_->memory);  // sets buffer and size
  stream_->memory = nullptr;
  const auto fail = [&](const char* what) {
    throw Error(fmt::format("{}: failed writing '{}' ({}): {}", stream_->flag, stream_->path, what,
                            std::strerror(errno)));
  };
  if (closed != 0) fail("the rows in memory");
  std::FILE* f = std::fopen(stream_->path.c_str(), "w");
  if (f == nullptr) fail("opening it");
  const std::size_t written = std::fwrite(stream_->buffer, 1, stream_->size, f);
  const bool write_ok = written == stream_->size && std::fflush(f) == 0;
  const int errno_at_write = errno;
  if (std::fclose(f) != 0 || !write_ok) {
    if (!write_ok) errno = errno_at_write;
    fail("writing it");
  }
}

OutputFile open_output(Communicator& world, const std::string& path, std::string_view flag) {
  if (path.empty()) return {};
  std::string why;
  const bool can_write = world.rank() != 0 || writable(path, flag, &why);
  if (bench::sum_across(world, can_write ? 0 : 1) > 0) {
    throw InvalidArgument(
        world.rank() == 0 ? why
                          : fmt::format("{} '{}': rank 0 cannot write the file there", flag, path));
  }
  if (world.rank() != 0) return {};
  return OutputFile(path, std::string(flag));
}

SweepPrinting::SweepPrinting(Format format, const std::string& time_reduce, int ranks,
                             std::FILE* file) {
  if (file) {  // the machine-readable form to the file, the table to the terminal
    printers_.emplace_back(format, time_reduce, ranks, file);
    printers_.emplace_back(Format::text, time_reduce, ranks);
  } else {
    printers_.emplace_back(format, time_reduce, ranks);
  }
}

bench::SweepCallbacks SweepPrinting::callbacks(bool quiet) {
  bench::SweepCallbacks cb;
  if (!quiet) {
    cb.on_group = [](const bench::SweepGroup& g) {
      fmt::print(stderr, "mcr bench: {} {} {} on {} ({} sizes)\n", to_string(g.op),
                 to_string(g.dtype), g.in_place ? "in-place" : "out-of-place", g.requested,
                 g.sizes);
    };
  }
  cb.on_skipped = [](const bench::SweepGroup&, std::string_view reason) {
    fmt::print(stderr, "mcr bench: skipped: {}\n", reason);
  };
  cb.on_row = [this](const bench::SweepRow& row) {
    for (auto& p : printers_)
      p.add(row);
  };
  return cb;
}

void SweepPrinting::finish(const bench::SweepResult& result) {
  for (auto& p : printers_)
    p.finish();
  if (result.wrong > 0) fmt::print(stderr, "mcr bench: {} wrong values\n", result.wrong);
}

ComparePrinting::ComparePrinting(const bench::CompareOptions& options, int ranks,
                                 std::vector<std::string> backends, bool json, std::FILE* file)
    : options_(options),
      ranks_(ranks),
      backends_(std::move(backends)),
      json_(json),
      file_(file),
      text_(!json || file != nullptr) {}  // with --json FILE the table still goes to the terminal

bench::CompareCallbacks ComparePrinting::callbacks(bool quiet) {
  if (text_) fmt::print("{}", compare_header(options_, ranks_, backends_));
  bench::CompareCallbacks cb;
  if (!quiet) {
    cb.on_group = [](OpType op, DType dtype) {
      fmt::print(stderr, "mcr bench --compare-auto: {} {}\n", to_string(op), to_string(dtype));
    };
  }
  cb.on_point = [this](const bench::ComparePoint& p) {
    rows_.push_back(to_json(p, backends_));
    if (text_) {
      fmt::print("{}", compare_line(p));
      std::fflush(stdout);
    }
  };
  return cb;
}

void ComparePrinting::finish(const bench::CompareResult& result) {
  if (json_) {
    const auto doc = nlohmann::json{{"ranks", ranks_},
                                    {"min_ratio", options_.min_ratio},
                                    {"async", options_.async},
                                    {"in_place", options_.in_place},
                                    {"rows", rows_}};
    fmt::print(file_ ? file_ : stdout, "{}\n", doc.dump(2));
  }
  if (text_) {
    fmt::print("# {} of {} points have auto >= {:.2f} x the best single backend\n", result.met,
               result.points.size(), options_.min_ratio);
  }
  if (result.wrong > 0) fmt::print(stderr, "mcr bench: {} wrong values\n", result.wrong);
}

}  // namespace mcr::cli
