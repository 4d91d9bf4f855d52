// Result rows of `mcr bench` and their text (nccl-tests style), CSV and JSON forms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcr/types.hpp"

namespace mcr::cli {

struct BenchRow {
  OpType op = OpType::all_reduce;
  DType dtype = DType::f32;
  std::size_t bytes = 0;
  std::size_t count = 0;  ///< elements of the op's message (per-rank chunk for chunked ops)
  int root = -1;          ///< -1 when the op has none
  bool in_place = false;
  bool async = false;
  std::string requested;  ///< the --backend value ("auto" or a name)
  std::string backend;    ///< the backend that ran
  int iterations = 0;
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  std::uint64_t wrong = 0;
};

enum class Format { text, csv, json };

/// Streams rows as they complete (text and CSV) or collects them (JSON, printed by finish()).
class RowPrinter {
 public:
  /// Prints to `out` (stdout by default; the caller owns and closes any other stream).
  RowPrinter(Format format, std::string time_reduce, int ranks, std::FILE* out = stdout);
  void add(const BenchRow& row);
  void finish();

 private:
  Format format_;
  std::FILE* out_;
  std::string time_reduce_;
  int ranks_;
  bool header_done_ = false;
  nlohmann::json rows_ = nlohmann::json::array();
};

nlohmann::json to_json(const BenchRow& row);

}  // namespace mcr::cli
