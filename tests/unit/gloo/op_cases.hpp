// Test cases for every collective: buffers prepared for one rank, the OpArgs the communicator
// would pass, and a check against a reference computed here, independently of the backend.
//
// Data-moving ops carry a per-(case, origin) byte pattern, so a misplaced or missing slot shows.
// Reductions use small integers ({1,2,3}, or 1..61 for bitwise ops): every sum, product (at most
// 3^4 = 81), minimum and maximum of up to four ranks is exact in every dtype, bf16 included, so the
// expected value is exact; only avg divides, and is compared with a dtype-sized tolerance.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "backend.hpp"
#include "mcr/types.hpp"

namespace mcr::test {

struct OpCase {
  std::string name;
  detail::OpArgs args;
  std::vector<std::uint8_t> in;
  std::vector<std::uint8_t> out;
  std::vector<std::size_t> send_counts;
  std::vector<std::size_t> recv_counts;
  /// Empty when the result is right, else what is wrong.
  std::function<std::string(const OpCase&)> check;
};

struct CaseSpec {
  int rank = 0;
  int size = 1;
  DType dtype = DType::f32;
  std::size_t count = 0;
  bool in_place = false;
  int root = 0;
  ReduceOp reduce = ReduceOp::sum;
  std::uint64_t id = 0;  ///< distinct per case, identical on every rank
};

// ---- values ------------------------------------------------------------------------------------

inline std::uint8_t pattern_byte(std::uint64_t id, std::uint64_t origin, std::size_t i) {
  std::uint64_t z = id * 0x9E3779B97F4A7C15ull ^ (origin << 40) ^ i;  // splitmix64 finalizer
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<std::uint8_t>(z ^ (z >> 31));
}
inline std::vector<std::uint8_t> pattern(std::uint64_t id, std::uint64_t origin, std::size_t n) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = pattern_byte(id, origin, i);
  return v;
}
constexpr std::uint8_t kGarbage = 0xCD;

inline bool is_bitwise(ReduceOp op) {
  return op == ReduceOp::band || op == ReduceOp::bor || op == ReduceOp::bxor;
}
inline std::int64_t reduce_input(ReduceOp op, int rank, std::size_t i) {
  return is_bitwise(op) ? static_cast<std::int64_t>((rank * 37 + i * 11) % 61 + 1)
                        : static_cast<std::int64_t>((rank * 7 + i * 3) % 3 + 1);
}

inline void put(DType t, std::uint8_t* base, std::size_t i, double v) {
  auto write = [&](auto x) { std::memcpy(base + i * sizeof x, &x, sizeof x); };
  switch (t) {
    case DType::f32:
      return write(static_cast<float>(v));
    case DType::f64:
      return write(v);
    case DType::f16:
      return write(Half(static_cast<float>(v)).bits);
    case DType::bf16:
      return write(BFloat16(static_cast<float>(v)).bits);
    case DType::i8:
      return write(static_cast<std::int8_t>(v));
    case DType::u8:
      return write(static_cast<std::uint8_t>(v));
    case DType::i32:
      return write(static_cast<std::int32_t>(v));
    case DType::i64:
      return write(static_cast<std::int64_t>(v));
  }
}
inline double get(DType t, const std::uint8_t* base, std::size_t i) {
  auto read = [&](auto x) {
    std::memcpy(&x, base + i * sizeof x, sizeof x);
    return x;
  };
  switch (t) {
    case DType::f32:
      return read(float{});
    case DType::f64:
      return read(double{});
    case DType::f16: {
      Half h;
      h.bits = read(std::uint16_t{});
      return static_cast<float>(h);
    }
    case DType::bf16: {
      BFloat16 h;
      h.bits = read(std::uint16_t{});
      return static_cast<float>(h);
    }
    case DType::i8:
      return read(std::int8_t{});
    case DType::u8:
      return read(std::uint8_t{});
    case DType::i32:
      return read(std::int32_t{});
    case DType::i64:
      return static_cast<double>(read(std::int64_t{}));
  }
  return 0;
}

/// The reduction over ranks 0..size-1 of element i, computed in double / int64.
inline double reduce_expected(ReduceOp op, int size, std::size_t i) {
  std::int64_t acc = reduce_input(op, 0, i);
  for (int r = 1; r < size; ++r) {
    const std::int64_t v = reduce_input(op, r, i);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        acc += v;
        break;
      case ReduceOp::prod:
        acc *= v;
        break;
      case ReduceOp::min:
        acc = std::min(acc, v);
        break;
      case ReduceOp::max:
        acc = std::max(acc, v);
        break;
      case ReduceOp::band:
        acc &= v;
        break;
      case ReduceOp::bor:
        acc |= v;
        break;
      case ReduceOp::bxor:
        acc ^= v;
        break;
    }
  }
  return op == ReduceOp::avg ? static_cast<double>(acc) / size : static_cast<double>(acc);
}

/// Compares `n` elements at `actual` (element offset `first` of the global index space) with
/// the reference. Exact except avg.
inline std::string check_reduced(DType t, ReduceOp op, int size, const std::uint8_t* actual,
                                 std::size_t first, std::size_t n) {
  const std::size_t es = dtype_size(t);
  std::vector<std::uint8_t> want(es);
  for (std::size_t k = 0; k < n; ++k) {
    const double e = reduce_expected(op, size, first + k);
    if (op == ReduceOp::avg) {
      const double tol = t == DType::f16 || t == DType::bf16 ? 1e-2
                         : t == DType::f32                   ? 1e-6
                                                             : 1e-12;
      const double a = get(t, actual, k);
      if (std::fabs(a - e) > tol * std::max(1.0, std::fabs(e))) {
        return "element " + std::to_string(k) + ": got " + std::to_string(a) + ", want " +
               std::to_string(e);
      }
      continue;
    }
    put(t, want.data(), 0, e);
    if (std::memcmp(want.data(), actual + k * es, es) != 0) {
      return "element " + std::to_string(k) + ": got " + std::to_string(get(t, actual, k)) +
             ", want " + std::to_string(e);
    }
  }
  return {};
}

inline std::string check_bytes(const std::uint8_t* actual, const std::vector<std::uint8_t>& want,
                               const std::string& what) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (actual[i] != want[i]) return what + ": first wrong byte at " + std::to_string(i);
  }
  return {};
}

// ---- builders ----------------------------------------------------------------------------------

inline std::unique_ptr<OpCase> new_case(const CaseSpec& s, OpType op) {
  auto c = std::make_unique<OpCase>();
  c->name = std::string(to_string(op)) + " " + std::string(to_string(s.dtype)) + " count " +
            std::to_string(s.count) + (s.in_place ? " in-place" : " out-of-place") + " root " +
            std::to_string(s.root) + " op " + std::string(to_string(s.reduce));
  c->args.op = op;
  c->args.dtype = s.dtype;
  c->args.reduce = s.reduce;
  c->args.count = s.count;
  c->args.root = s.root;
  c->args.op_name = to_string(op);
  c->args.sequence = s.id;
  return c;
}

inline std::vector<std::uint8_t> reduce_inputs(const CaseSpec& s, std::size_t n) {
  std::vector<std::uint8_t> v(n * dtype_size(s.dtype));
  for (std::size_t i = 0; i < n; ++i) {
    put(s.dtype, v.data(), i, static_cast<double>(reduce_input(s.reduce, s.rank, i)));
  }
  return v;
}

inline std::unique_ptr<OpCase> all_reduce_case(const CaseSpec& s) {
  auto c = new_case(s, OpType::all_reduce);
  c->in = reduce_inputs(s, s.count);
  if (s.in_place) {
    c->args.in = c->args.out = c->in.data();
    c->args.in_place = true;
  } else {
    c->out.assign(c->in.size(), kGarbage);
    c->args.in = c->in.data();
    c->args.out = c->out.data();
  }
  c->check = [s](const OpCase& k) {
    const auto* res = static_cast<const std::uint8_t*>(k.args.out);
    return check_reduced(s.dtype, s.reduce, s.size, res, 0, s.count);
  };
  return c;
}

inline std::unique_ptr<OpCase> reduce_case(const CaseSpec& s) {
  auto c = new_case(s, OpType::reduce);
  c->in = reduce_inputs(s, s.count);
  const bool root = s.rank == s.root;
  if (s.in_place) {
    c->args.in = c->in.data();
    c->args.out = root ? c->in.data() : nullptr;
    c->args.in_place = root;
  } else {
    c->args.in = c->in.data();
    if (root) {
      c->out.assign(c->in.size(), kGarbage);
      c->args.out = c->out.data();
    }
  }
  const auto original = c->in;
  c->check = [s, root, original](const OpCase& k) -> std::string {
    if (root) {
      return check_reduced(s.dtype, s.reduce, s.size, static_cast<const std::uint8_t*>(k.args.out),
                           0, s.count);
    }
    return check_bytes(k.in.data(), original, "non-root input changed");
  };
  return c;
}

inline std::unique_ptr<OpCase> reduce_scatter_case(const CaseSpec& s) {
  auto c = new_case(s, OpType::reduce_scatter);
  const std::size_t es = dtype_size(s.dtype);
  c->in = reduce_inputs(s, s.count * static_cast<std::size_t>(s.size));
  c->args.in = c->in.data();
  if (s.in_place) {
    c->args.out = c->in.data() + static_cast<std::size_t>(s.rank) * s.count * es;
    c->args.in_place = true;
  } else {
    c->out.assign(s.count * es, kGarbage);
    c->args.out = c->out.data();
  }
  c->check = [s](const OpCase& k) {
    return check_reduced(s.dtype, s.reduce, s.size, static_cast<const std::uint8_t*>(k.args.out),
                         static_cast<std::size_t>(s.rank) * s.count, s.count);
  };
  return c;
}

inline std::unique_ptr<OpCase> broadcast_case(const CaseSpec& s) {
  auto c = new_case(s, OpType::broadcast);
  const std::size_t bytes = s.count * dtype_size(s.dtype);
  c->in = s.rank == s.root ? pattern(s.id, static_cast<std::uint64_t>(s.root), bytes)
                           : std::vector<std::uint8_t>(bytes, kGarbage);
  c->args.in = c->args.out = c->in.data();
  c->check = [s, bytes](const OpCase& k) {
    return check_bytes(k.in.data(), pattern(s.id, static_cast<std::uint64_t>(s.root), bytes),
                       "broadcast result");
  };
  return c;
}

inline std::vector<std::uint8_t> concat_patterns(std::uint64_t id, int size, std::size_t bytes) {
  std::vector<std::uint8_t> all;
  for (int r = 0; r < size; ++r) {
    auto p = pattern(id, static_cast<std::uint64_t>(r), bytes);
    all.insert(all.end(), p.begin(), p.end());
  }
  return all;
}

inline std::unique_ptr<OpCase> all_gather_case(const CaseSpec& s) {
  auto c = new_case(s, OpType::all_gather);
  const std::size_t bytes = s.count * dtype_size(s.dtype);
  const auto mine = pattern(s.id, static_cast<std::uint64_t>(s.rank), bytes);
  c->out.assign(bytes * static_cast<std::size_t>(s.size), kGarbage);
  std::uint8_t* slot = c->out.data() + static_cast<std::size_t>(s.rank) * bytes;
  if (s.in_place) {
    std::copy(mine.begin(), mine.end(), slot);
    c->args.in = slot;
    c->args.in_place = true;
  } else {
    c->in = mine;
    c->args.in = c->in.data();
  }
  c->args.out = c->out.data();
  c->check = [s, bytes](const OpCase& k) {
    return check_bytes(k.out.data(), concat_patterns(s.id, s.size, bytes), "gathered output");
  };
  return c;
}

inline std::unique_ptr<OpCase> all_gather_v_case(const CaseSpec& s) {
  auto c = new_case(s, OpType::all_gather_v);
  const std::size_t es = dtype_size(s.dtype);
  // Uneven, with empty contributions from odd ranks.
  for (int r = 0; r < s.size; ++r) {
    c->send_counts.push_back(s.count == 0 || r % 2 == 1 ? 0
                                                        : s.count + static_cast<std::size_t>(r));
  }
  const std::size_t total =
      std::accumulate(c->send_counts.begin(), c->send_counts.end(), std::size_t{0});
  const std::size_t offset =
      std::accumulate(c->send_counts.begin(), c->send_counts.begin() + s.rank, std::size_t{0});
  const auto mine = pattern(s.id, static_cast<std::uint64_t>(s.rank),
                            c->send_counts[static_cast<std::size_t>(s.rank)] * es);
  c->out.assign(total * es + 1, kGarbage);  // +1: a non-null buffer even when empty
  if (s.in_place) {
    std::copy(mine.begin(), mine.end(), c->out.begin() + static_cast<std::ptrdiff_t>(offset * es));
    c->args.in = c->out.data() + offset * es;
    c->args.in_place = true;
  } else {
    c->in = mine;
    c->args.in = c->in.data();
  }
  c->args.out = c->out.data();
  c->args.send_counts = c->send_counts.data();
  c->check = [s, es](const OpCase& k) {
    std::vector<std::uint8_t> want;
    for (int r = 0; r < s.size; ++r) {
      auto p = pattern(s.id, static_cast<std::uint64_t>(r),
                       k.send_counts[static_cast<std::size_t>(r)] * es);
      want.insert(want.end(), p.begin(), p.end());
    }
    want.push_back(kGarbage);  // the byte past the end is untouched
    return check_bytes(k.out.data(), want, "gathered output");
  };
  return c;
}

inline std::unique_ptr<OpCase> gather_case(const CaseSpec& s) {
  auto c = new_case(s, OpType::gather);
  const std::size_t bytes = s.count * dtype_size(s.dtype);
  const auto mine = pattern(s.id, static_cast<std::uint64_t>(s.rank), bytes);
  const bool root = s.rank == s.root;
  if (root) {
    c->out.assign(bytes * static_cast<std::size_t>(s.size), kGarbage);
    c->args.out = c->out.data();
  }
  if (root && s.in_place) {
    std::uint8_t* slot = c->out.data() + static_cast<std::size_t>(s.rank) * bytes;
    std::copy(mine.begin(), mine.end(), slot);
    c->args.in = slot;
    c->args.in_place = true;
  } else {
    c->in = mine;
    c->args.in = c->in.data();
  }
  c->check = [s, bytes, root, mine](const OpCase& k) -> std::string {
    if (!root) return check_bytes(k.in.data(), mine, "non-root input changed");
    return check_bytes(k.out.data(), concat_patterns(s.id, s.size, bytes), "gathered output");
  };
  return c;
}

inline std::unique_ptr<OpCase> scatter_case(const CaseSpec& s) {
  auto c = new_case(s, OpType::scatter);
  const std::size_t bytes = s.count * dtype_size(s.dtype);
  const bool root = s.rank == s.root;
  if (root) {
    c->in = concat_patterns(s.id, s.size, bytes);
    c->args.in = c->in.data();
  }
  if (root && s.in_place) {
    c->args.out = c->in.data() + static_cast<std::size_t>(s.rank) * bytes;
    c->args.in_place = true;
  } else {
    c->out.assign(bytes, kGarbage);
    c->args.out = c->out.data();
  }
  c->check = [s, bytes](const OpCase& k) {
    return check_bytes(static_cast<const std::uint8_t*>(k.args.out),
                       pattern(s.id, static_cast<std::uint64_t>(s.rank), bytes), "scattered share");
  };
  return c;
}

inline std::unique_ptr<OpCase> all_to_all_case(const CaseSpec& s) {
  auto c = new_case(s, OpType::all_to_all);
  const std::size_t bytes = s.count * dtype_size(s.dtype);
  const auto n = static_cast<std::uint64_t>(s.size);
  for (int j = 0; j < s.size; ++j) {
    auto p = pattern(s.id, static_cast<std::uint64_t>(s.rank) * n + static_cast<std::uint64_t>(j),
                     bytes);
    c->in.insert(c->in.end(), p.begin(), p.end());
  }
  c->args.in = c->in.data();
  if (s.in_place) {
    c->args.out = c->in.data();
    c->args.in_place = true;
  } else {
    c->out.assign(c->in.size(), kGarbage);
    c->args.out = c->out.data();
  }
  c->check = [s, bytes, n](const OpCase& k) {
    std::vector<std::uint8_t> want;
    for (int j = 0; j < s.size; ++j) {
      auto p = pattern(s.id, static_cast<std::uint64_t>(j) * n + static_cast<std::uint64_t>(s.rank),
                       bytes);
      want.insert(want.end(), p.begin(), p.end());
    }
    return check_bytes(static_cast<const std::uint8_t*>(k.args.out), want, "all_to_all output");
  };
  return c;
}

inline std::unique_ptr<OpCase> all_to_all_v_case(const CaseSpec& s) {
  auto c = new_case(s, OpType::all_to_all_v);
  const std::size_t es = dtype_size(s.dtype);
  const auto n = static_cast<std::uint64_t>(s.size);
  // Elements rank a sends to rank b. In place needs send_counts == recv_counts: symmetric.
  auto piece = [&s](int a, int b) -> std::size_t {
    if (s.count == 0) return 0;
    return s.in_place ? (static_cast<std::size_t>(a + b) + s.count) % 4
                      : (static_cast<std::size_t>(2 * a + b) + s.count) % 5;
  };
  for (int j = 0; j < s.size; ++j) {
    c->send_counts.push_back(piece(s.rank, j));
    c->recv_counts.push_back(piece(j, s.rank));
    auto p = pattern(s.id, static_cast<std::uint64_t>(s.rank) * n + static_cast<std::uint64_t>(j),
                     piece(s.rank, j) * es);
    c->in.insert(c->in.end(), p.begin(), p.end());
  }
  std::vector<std::uint8_t> want;
  for (int j = 0; j < s.size; ++j) {
    auto p = pattern(s.id, static_cast<std::uint64_t>(j) * n + static_cast<std::uint64_t>(s.rank),
                     piece(j, s.rank) * es);
    want.insert(want.end(), p.begin(), p.end());
  }
  if (s.in_place) {
    c->args.in = c->args.out = c->in.empty() ? nullptr : c->in.data();
    c->args.in_place = true;
  } else {
    c->out.assign(want.size(), kGarbage);
    c->args.in = c->in.empty() ? nullptr : c->in.data();
    c->args.out = c->out.empty() ? nullptr : c->out.data();
  }
  c->args.send_counts = c->send_counts.data();
  c->args.recv_counts = c->recv_counts.data();
  c->check = [want](const OpCase& k) {
    if (want.empty()) return std::string();
    return check_bytes(static_cast<const std::uint8_t*>(k.args.out), want, "all_to_all_v output");
  };
  return c;
}

inline std::unique_ptr<OpCase> barrier_case(const CaseSpec& s) {
  auto c = new_case(s, OpType::barrier);
  c->check = [](const OpCase&) { return std::string(); };
  return c;
}

/// Every collective case for one (dtype, count, placement), in an order identical on all ranks.
/// `next_id` numbers the cases; roots rotate through the group so non-zero roots are covered.
/// Reductions run every reduce op valid for the dtype when `every_reduce_op`, else sum plus the
/// op that needs most care (avg for floating types, bxor for integers).
inline std::vector<std::unique_ptr<OpCase>> collective_cases(int rank, int size, DType dtype,
                                                             std::size_t count, bool in_place,
                                                             std::uint64_t& next_id,
                                                             bool every_reduce_op = true) {
  std::vector<std::unique_ptr<OpCase>> cases;
  auto spec = [&](ReduceOp op = ReduceOp::sum) {
    CaseSpec s;
    s.rank = rank;
    s.size = size;
    s.dtype = dtype;
    s.count = count;
    s.in_place = in_place;
    s.reduce = op;
    s.id = next_id++;
    s.root = static_cast<int>((s.id * 7 + 1) % static_cast<std::uint64_t>(size));
    return s;
  };
  for (ReduceOp op : kAllReduceOps) {
    if (!reduce_op_valid_for(op, dtype)) continue;
    if (!every_reduce_op && op != ReduceOp::sum && op != ReduceOp::avg && op != ReduceOp::bxor) {
      continue;
    }
    cases.push_back(all_reduce_case(spec(op)));
    cases.push_back(reduce_case(spec(op)));
    cases.push_back(reduce_scatter_case(spec(op)));
  }
  cases.push_back(broadcast_case(spec()));
  cases.push_back(all_gather_case(spec()));
  cases.push_back(all_gather_v_case(spec()));
  cases.push_back(gather_case(spec()));
  cases.push_back(scatter_case(spec()));
  cases.push_back(all_to_all_case(spec()));
  cases.push_back(all_to_all_v_case(spec()));
  cases.push_back(barrier_case(spec()));
  return cases;
}

}  // namespace mcr::test
