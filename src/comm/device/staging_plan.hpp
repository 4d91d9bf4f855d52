// Layout of a staged operation: which device bytes go to pinned host memory before the host-only
// backend runs, where its input and output pointers land in the host buffer, and which bytes come
// back. Pure host code (unit-tested without a GPU); the staging wrapper executes it.
#pragma once

#include <cstddef>

#include "core/backend.hpp"

namespace mcr::detail::device {

/// One contiguous copy between the device tensor and the host buffer. The device side of copy_in is
/// OpArgs::in, or OpArgs::out when an in-place input is given only as a slot of the output; the
/// device side of copy_out is OpArgs::out, or OpArgs::in symmetrically.
struct StagedCopy {
  std::size_t device_offset = 0;  ///< bytes from the start of that device buffer
  std::size_t host_offset = 0;    ///< bytes from the start of the host buffer
  std::size_t bytes = 0;
};

struct StagingPlan {
  std::size_t host_bytes = 0;  ///< pinned bytes needed
  /// Where the inner backend's `in`/`out` point in the host buffer (meaningful only when the device
  /// operation has that pointer: null stays null).
  std::size_t host_in_offset = 0;
  std::size_t host_out_offset = 0;
  StagedCopy copy_in;   ///< device input -> host, before the operation (bytes 0: nothing to copy)
  StagedCopy copy_out;  ///< host -> device output, after the operation (bytes 0: nothing)
  /// In-place layouts: the device input lies inside the output buffer at this offset (or the output
  /// inside the input for scatter/reduce_scatter). The host buffer mirrors the aliasing, so the
  /// inner backend sees the same in-place form.
  bool in_place = false;
};

/// Elements this rank reads from `in` and writes to `out` for `args` (0 where the rank has none).
struct Extents {
  std::size_t in = 0;
  std::size_t out = 0;
};
Extents staged_extents(const OpArgs& args, int rank, int size);

/// The plan for `args` on rank `rank` of `size`. Throws InvalidArgument if an in-place input does
/// not lie inside the buffer it is meant to alias.
StagingPlan plan_staging(const OpArgs& args, int rank, int size);

/// Host buffers are split at this alignment (enough for every element type and for DMA).
inline constexpr std::size_t kStagingAlignment = 256;

}  // namespace mcr::detail::device
