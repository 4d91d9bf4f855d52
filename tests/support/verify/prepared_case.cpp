#include "prepared_case.hpp"

#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

namespace mcr::test {
namespace {

std::size_t total(const std::vector<std::size_t>& v) {
  return std::accumulate(v.begin(), v.end(), std::size_t{0});
}

std::vector<std::size_t> offsets_of(const std::vector<std::size_t>& counts) {
  std::vector<std::size_t> offsets(counts.size(), 0);
  for (std::size_t i = 1; i < counts.size(); ++i)
    offsets[i] = offsets[i - 1] + counts[i - 1];
  return offsets;
}

// Index space of all_to_all_v values: element i of the chunk a rank sends to `dst`. The stride only
// has to keep chunks of different destinations apart.
constexpr std::size_t kChunkStride = 1000003;

}  // namespace

bool has_in_place_form(OpType op) {
  switch (op) {
    case OpType::reduce:
    case OpType::all_reduce:
    case OpType::all_gather:
    case OpType::all_gather_v:
    case OpType::gather:
    case OpType::scatter:
    case OpType::reduce_scatter:
    case OpType::all_to_all:
    case OpType::all_to_all_v:
      return true;
    default:
      return false;
  }
}

bool has_out_of_place_form(OpType op) {
  return op != OpType::broadcast && op != OpType::barrier;
}

std::vector<OpType> tested_ops() {
  std::vector<OpType> ops;
  for (OpType op : kAllOpTypes) {
    if (op != OpType::recv) ops.push_back(op);  // send stands for the send/recv exchange
  }
  return ops;
}

std::string describe(const OpCase& c) {
  std::string s = fmt::format("{} {}", c.op == OpType::send ? "send/recv" : to_string(c.op),
                              to_string(c.dtype));
  if (is_reduction(c.op)) s += fmt::format(" {}", to_string(c.reduce));
  s += fmt::format(" count={} {} {}", c.count, c.in_place ? "in-place" : "out-of-place",
                   c.async ? "async" : "sync");
  switch (c.op) {
    case OpType::send:
      s += fmt::format(" shift={} tag={}", c.root, c.tag);
      break;
    case OpType::broadcast:
    case OpType::reduce:
    case OpType::gather:
    case OpType::scatter:
      s += fmt::format(" root={}", c.root);
      break;
    default:
      break;
  }
  s += fmt::format(" backend={} salt={}", c.backend.empty() ? "(selected)" : c.backend, c.salt);
  return s;
}

std::string combination(const OpCase& c) {
  return fmt::format("{} {}{}", c.op == OpType::send ? "send/recv" : to_string(c.op),
                     to_string(c.dtype),
                     is_reduction(c.op) ? fmt::format(" {}", to_string(c.reduce)) : "");
}

PreparedCase::PreparedCase(const OpCase& c, int rank, int size)
    : case_(c), rank_(rank), size_(size) {
  switch (c.op) {
    case OpType::send:
    case OpType::recv:
      prepare_p2p();
      break;
    case OpType::broadcast:
      prepare_broadcast();
      break;
    case OpType::reduce:
    case OpType::all_reduce:
    case OpType::reduce_scatter:
      prepare_reduction();
      break;
    case OpType::all_gather:
    case OpType::all_gather_v:
    case OpType::gather:
      prepare_gather_like();
      break;
    case OpType::scatter:
      prepare_scatter();
      break;
    case OpType::all_to_all:
      prepare_all_to_all();
      break;
    case OpType::all_to_all_v:
      prepare_all_to_all_v();
      break;
    case OpType::barrier:
      break;
  }
}

template <class F>
void PreparedCase::expect(Target target, std::size_t offset, std::size_t n, const std::string& what,
                          F&& value) {
  Check check{target, offset, Buffer(case_.dtype, n), {}, what};
  for (std::size_t i = 0; i < n; ++i)
    check.expected.set(i, value(i));
  checks_.push_back(std::move(check));
}

void PreparedCase::expect_unchanged(Target target, const std::string& what) {
  checks_.push_back(Check{target, 0, buffer(target), {}, what});  // a copy of what it holds now
}

void PreparedCase::fill_sentinel(Buffer& b) {
  const std::int64_t s = sentinel_value(b.dtype());
  fill(b, 0, b.count(), [s](std::size_t) { return s; });
}

void PreparedCase::prepare_p2p() {
  const int shift = case_.root;
  if (!case_.async && shift % size_ == 0) {
    throw std::logic_error("test bug: a synchronous send/recv exchange with itself would block");
  }
  const int src = ((rank_ - shift) % size_ + size_) % size_;
  const std::size_t n = case_.count;
  input_ = Buffer(case_.dtype, n);
  fill(input_, 0, n, [&](std::size_t i) { return data(rank_, i); });
  output_ = Buffer(case_.dtype, n);
  fill_sentinel(output_);
  expect(Target::output, 0, n, fmt::format("received from rank {}", src),
         [&](std::size_t i) { return data(src, i); });
  expect_unchanged(Target::input, "send buffer");
}

void PreparedCase::prepare_broadcast() {
  const std::size_t n = case_.count;
  output_ = Buffer(case_.dtype, n);
  if (rank_ == case_.root) {
    fill(output_, 0, n, [&](std::size_t i) { return data(case_.root, i); });
  } else {
    fill_sentinel(output_);
  }
  expect(Target::output, 0, n, "broadcast buffer",
         [&](std::size_t i) { return data(case_.root, i); });
}

void PreparedCase::prepare_reduction() {
  const std::size_t n = case_.count;
  const bool scatter = case_.op == OpType::reduce_scatter;
  const std::size_t in_count = scatter ? n * static_cast<std::size_t>(size_) : n;
  input_ = Buffer(case_.dtype, in_count);
  fill(input_, 0, in_count, [&](std::size_t i) { return operand(rank_, i); });

  const bool has_result = case_.op != OpType::reduce || rank_ == case_.root;
  // Index (in the full operand space) of result element i on this rank.
  const std::size_t base = scatter ? static_cast<std::size_t>(rank_) * n : 0;
  // In place, the result lands in the input: reduce_scatter's in the rank's own slot.
  const Target result_target = case_.in_place ? Target::input : Target::output;
  const std::size_t result_offset = case_.in_place ? base : 0;
  if (!case_.in_place) {
    output_ = Buffer(case_.dtype, has_result ? n : 0);
    fill_sentinel(output_);
    expect_unchanged(Target::input, "input");
  }
  if (!has_result) return;
  if (case_.reduce == ReduceOp::avg) {
    Check check{result_target, result_offset, Buffer(case_.dtype, 0), {}, "avg result"};
    check.expected_avg.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      check.expected_avg[i] = expected_avg(case_.dtype, base + i, size_, case_.salt);
    }
    checks_.push_back(std::move(check));
    return;
  }
  expect(result_target, result_offset, n, fmt::format("{} result", to_string(case_.reduce)),
         [&](std::size_t i) {
           return reduce_reference(case_.reduce, case_.dtype, base + i, size_, case_.salt);
         });
}

void PreparedCase::prepare_gather_like() {
  const std::size_t n = case_.count;
  std::vector<std::size_t> counts(static_cast<std::size_t>(size_), n);
  if (case_.op == OpType::all_gather_v) {
    for (int r = 0; r < size_; ++r)
      counts[static_cast<std::size_t>(r)] = gather_v_count(n, r);
    counts_a_ = counts;
  }
  const auto offsets = offsets_of(counts);
  const std::size_t mine = counts[static_cast<std::size_t>(rank_)];
  const bool rooted = case_.op == OpType::gather;
  const bool receives = !rooted || rank_ == case_.root;

  output_ = Buffer(case_.dtype, receives ? total(counts) : 0);
  fill_sentinel(output_);
  const bool in_place_here = case_.in_place && receives;
  if (in_place_here) {
    fill(output_, offsets[static_cast<std::size_t>(rank_)], mine,
         [&](std::size_t i) { return data(rank_, i); });
  } else {
    input_ = Buffer(case_.dtype, mine);
    fill(input_, 0, mine, [&](std::size_t i) { return data(rank_, i); });
    expect_unchanged(Target::input, "input");
  }
  if (!receives) return;
  for (int r = 0; r < size_; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    expect(Target::output, offsets[ur], counts[ur], fmt::format("output slot of rank {}", r),
           [&](std::size_t i) { return data(r, i); });
  }
}

void PreparedCase::prepare_scatter() {
  const std::size_t n = case_.count;
  const bool root = rank_ == case_.root;
  input_ = Buffer(case_.dtype, root ? n * static_cast<std::size_t>(size_) : 0);
  // Slot r of the root's input carries data for rank r.
  for (int r = 0; root && r < size_; ++r) {
    fill(input_, static_cast<std::size_t>(r) * n, n, [&](std::size_t i) { return data(r, i); });
  }
  if (root) expect_unchanged(Target::input, "root's input");
  if (case_.in_place && root) return;  // the root's slot is the output: unchanged is the check
  output_ = Buffer(case_.dtype, n);
  fill_sentinel(output_);
  expect(Target::output, 0, n, "output", [&](std::size_t i) { return data(rank_, i); });
}

void PreparedCase::prepare_all_to_all() {
  const std::size_t n = case_.count;
  const std::size_t total_count = n * static_cast<std::size_t>(size_);
  input_ = Buffer(case_.dtype, total_count);
  // Slot j of the input is for rank j: value index j * n + i.
  fill(input_, 0, total_count, [&](std::size_t i) { return data(rank_, i); });
  Target target = Target::input;
  if (!case_.in_place) {
    output_ = Buffer(case_.dtype, total_count);
    fill_sentinel(output_);
    expect_unchanged(Target::input, "input");
    target = Target::output;
  }
  for (int s = 0; s < size_; ++s) {
    expect(target, static_cast<std::size_t>(s) * n, n, fmt::format("slot from rank {}", s),
           [&](std::size_t i) { return data(s, static_cast<std::size_t>(rank_) * n + i); });
  }
}

void PreparedCase::prepare_all_to_all_v() {
  const std::size_t n = case_.count;
  const auto p = static_cast<std::size_t>(size_);
  counts_a_.assign(p, 0);
  counts_b_.assign(p, 0);
  for (int j = 0; j < size_; ++j) {
    counts_a_[static_cast<std::size_t>(j)] = all_to_all_v_count(n, rank_, j, case_.in_place);
    counts_b_[static_cast<std::size_t>(j)] = all_to_all_v_count(n, j, rank_, case_.in_place);
  }
  const auto send_offsets = offsets_of(counts_a_);
  const auto recv_offsets = offsets_of(counts_b_);
  input_ = Buffer(case_.dtype, total(counts_a_));
  for (int j = 0; j < size_; ++j) {
    const auto uj = static_cast<std::size_t>(j);
    fill(input_, send_offsets[uj], counts_a_[uj],
         [&](std::size_t i) { return data(rank_, uj * kChunkStride + i); });
  }
  Target target = Target::input;
  if (!case_.in_place) {
    output_ = Buffer(case_.dtype, total(counts_b_));
    fill_sentinel(output_);
    expect_unchanged(Target::input, "input");
    target = Target::output;
  }
  for (int s = 0; s < size_; ++s) {
    const auto us = static_cast<std::size_t>(s);
    expect(
        target, recv_offsets[us], counts_b_[us], fmt::format("chunk from rank {}", s),
        [&](std::size_t i) { return data(s, static_cast<std::size_t>(rank_) * kChunkStride + i); });
  }
}

Operands PreparedCase::operands() const {
  const std::size_t n = case_.count;
  const bool root = rank_ == case_.root;
  const auto slot = [n](int r) { return static_cast<std::size_t>(r) * n; };
  const Region input{Target::input, 0, input_.count()};
  const Region output{Target::output, 0, output_.count()};
  const Region null{};
  Operands o;
  o.counts_a = counts_a_;
  o.counts_b = counts_b_;
  // The aliasing below is the convention of communicator.hpp; `in_place` is what the communicator
  // derives from it (an empty slot at offset 0 of an empty buffer is not in place for the rooted
  // and scattering forms).
  switch (case_.op) {
    case OpType::send:
    case OpType::recv:
      o.in = input;
      o.out = output;
      break;
    case OpType::broadcast:
      o.in = o.out = output;
      o.single_tensor = o.in_place = true;
      break;
    case OpType::reduce:
    case OpType::all_reduce:
      o.in = input;
      if (case_.in_place) {
        o.out = input;
        o.single_tensor = true;
        o.in_place = case_.op == OpType::all_reduce || root;
      } else {
        o.out = case_.op == OpType::all_reduce || root ? output : null;
      }
      break;
    case OpType::all_gather:
      o.in = case_.in_place ? Region{Target::output, slot(rank_), n} : input;
      o.out = output;
      o.in_place = case_.in_place;
      break;
    case OpType::all_gather_v: {
      std::size_t offset = 0;
      for (int r = 0; r < rank_; ++r)
        offset += counts_a_[static_cast<std::size_t>(r)];
      o.in = case_.in_place
                 ? Region{Target::output, offset, counts_a_[static_cast<std::size_t>(rank_)]}
                 : input;
      o.out = output;
      o.in_place = case_.in_place;
      break;
    }
    case OpType::gather:
      o.in = case_.in_place && root ? Region{Target::output, slot(rank_), n} : input;
      o.out = root ? output : null;
      o.in_place = case_.in_place && root && n > 0;
      break;
    case OpType::scatter:
      o.in = root ? input : null;
      o.out = case_.in_place && root ? Region{Target::input, slot(rank_), n} : output;
      o.in_place = case_.in_place && root && n > 0;
      break;
    case OpType::reduce_scatter:
      o.in = input;
      o.out = case_.in_place ? Region{Target::input, slot(rank_), n} : output;
      o.in_place = case_.in_place && n > 0;
      break;
    case OpType::all_to_all:
    case OpType::all_to_all_v:
      o.in = input;
      o.out = case_.in_place ? input : output;
      o.in_place = case_.in_place;
      break;
    case OpType::barrier:
      break;
  }
  return o;
}

void* PreparedCase::address(const Placement& p, const Region& r) const {
  if (r.target == Target::none) return nullptr;
  auto* base = static_cast<std::byte*>(r.target == Target::input ? p.input : p.output);
  return base + r.offset * dtype_size(case_.dtype);
}

std::string PreparedCase::verify() const {
  std::string problems;
  for (const Check& c : checks_) {
    const Buffer& got = buffer(c.target);
    const std::string diff = c.expected_avg.empty()
                                 ? compare_exact(got, c.offset, c.expected)
                                 : compare_close(got, c.offset, c.expected_avg, 2.0);
    if (!diff.empty()) problems += fmt::format("{}: {}\n", c.what, diff);
  }
  for (Target t : {Target::input, Target::output}) {
    if (const std::string damage = buffer(t).guard_damage(); !damage.empty()) {
      problems += fmt::format("{} buffer {}\n", t == Target::input ? "input" : "output", damage);
    }
  }
  return problems;
}

}  // namespace mcr::test
