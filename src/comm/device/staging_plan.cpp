#include "device/staging_plan.hpp"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "mcr/errors.hpp"

namespace mcr::detail::device {

namespace {

std::size_t sum(const std::size_t* counts, int size) {
  std::size_t total = 0;
  for (int r = 0; r < size; ++r)
    total += counts[r];
  return total;
}

std::size_t align_up(std::size_t bytes) {
  return (bytes + kStagingAlignment - 1) / kStagingAlignment * kStagingAlignment;
}

/// The ops whose in-place form puts the output inside the input (the others: input inside output).
bool output_inside_input(OpType op) {
  return op == OpType::scatter || op == OpType::reduce_scatter;
}

/// Where, in elements, the smaller buffer of an in-place op sits when its pointer is not given.
std::size_t default_in_place_slot(const OpArgs& args, int rank) {
  const auto n = args.count;
  switch (args.op) {
    case OpType::all_gather:
    case OpType::reduce_scatter:
      return static_cast<std::size_t>(rank) * n;
    case OpType::gather:
    case OpType::scatter:
      return static_cast<std::size_t>(args.root) * n;
    case OpType::all_gather_v:
      return sum(args.send_counts, rank);  // the counts of the ranks before this one
    default:
      return 0;
  }
}

}  // namespace

Extents staged_extents(const OpArgs& args, int rank, int size) {
  const auto n = args.count;
  const auto group = static_cast<std::size_t>(size);
  const bool root = rank == args.root;
  switch (args.op) {
    case OpType::send:
      return {n, 0};
    case OpType::recv:
      return {0, n};
    // One buffer: the root's data goes out, everyone else's comes back.
    case OpType::broadcast:
      return root ? Extents{n, 0} : Extents{0, n};
    case OpType::reduce:
      return {n, root && args.out != nullptr ? n : 0};
    case OpType::all_reduce:
      return {n, n};
    case OpType::all_gather:
      return {n, n * group};
    case OpType::all_gather_v:
      return {args.send_counts[rank], sum(args.send_counts, size)};
    case OpType::gather:
      return {n, root ? n * group : 0};
    case OpType::scatter:
      return {root ? n * group : 0, n};
    case OpType::reduce_scatter:
      return {n * group, n};
    case OpType::all_to_all:
      return {n * group, n * group};
    case OpType::all_to_all_v:
      return {sum(args.send_counts, size), sum(args.recv_counts, size)};
    case OpType::barrier:
      return {0, 0};
  }
  return {0, 0};
}

StagingPlan plan_staging(const OpArgs& args, int rank, int size) {
  const std::size_t esize = dtype_size(args.dtype);
  const Extents ext = staged_extents(args, rank, size);
  const std::size_t in_bytes = ext.in * esize;
  const std::size_t out_bytes = ext.out * esize;
  StagingPlan plan;

  if (args.op == OpType::broadcast) {
    // The device op reads and writes one buffer; so does the host op.
    plan.host_bytes = std::max(in_bytes, out_bytes);
    plan.copy_in = {0, 0, in_bytes};
    plan.copy_out = {0, 0, out_bytes};
    return plan;
  }
  if (!args.in_place) {
    plan.host_in_offset = 0;
    plan.host_out_offset = align_up(in_bytes);
    plan.host_bytes = plan.host_out_offset + out_bytes;
    plan.copy_in = {0, 0, in_bytes};
    plan.copy_out = {0, plan.host_out_offset, out_bytes};
    return plan;
  }

  plan.in_place = true;
  const bool inner_is_output = output_inside_input(args.op);
  const std::size_t container_bytes = inner_is_output ? in_bytes : out_bytes;
  const std::size_t inner_bytes = inner_is_output ? out_bytes : in_bytes;
  const void* container = inner_is_output ? args.in : args.out;
  const void* inner = inner_is_output ? static_cast<const void*>(args.out) : args.in;
  std::size_t inner_offset = default_in_place_slot(args, rank) * esize;
  // A rank without the container's data (the single-buffer reduce off the root) has nothing to
  // alias: its input alone is staged.
  if (container != nullptr && inner != nullptr && container_bytes != 0) {
    const auto c = reinterpret_cast<std::uintptr_t>(container);
    const auto i = reinterpret_cast<std::uintptr_t>(inner);
    if (i < c || i - c + inner_bytes > container_bytes) {
      throw InvalidArgument(fmt::format(
          "staged {} in place: the {} buffer ({} bytes at offset {}) does not lie inside the {} "
          "buffer ({} bytes)",
          to_string(args.op), inner_is_output ? "output" : "input", inner_bytes,
          static_cast<long long>(i) - static_cast<long long>(c),
          inner_is_output ? "input" : "output", container_bytes));
    }
    inner_offset = i - c;
  }
  // A non-root in-place reduce has no output buffer: the input alone sizes the host buffer.
  plan.host_bytes = std::max(container_bytes, inner_offset + inner_bytes);
  if (inner_is_output) {
    // The whole input goes over; the result is the caller's slot of it.
    plan.host_in_offset = 0;
    plan.host_out_offset = inner_offset;
    plan.copy_in = {0, 0, in_bytes};
    plan.copy_out = {inner == nullptr ? inner_offset : 0, inner_offset, out_bytes};
  } else {
    // Only the caller's slot carries input; the whole output comes back.
    plan.host_in_offset = inner_offset;
    plan.host_out_offset = 0;
    plan.copy_in = {inner == nullptr ? inner_offset : 0, inner_offset, in_bytes};
    plan.copy_out = {0, 0, out_bytes};
  }
  return plan;
}

}  // namespace mcr::detail::device
