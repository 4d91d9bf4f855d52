// Text, CSV and JSON output of `mcr bench`.
#include "bench_output.hpp"

#include <fmt/core.h>

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

}  // namespace mcr::cli
