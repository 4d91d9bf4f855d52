// The host-side logic of the NCCL backend, free of CUDA calls so that it is unit-tested without a
// GPU: group rank mapping for ncclCommSplit, and the ordered list of stream steps each operation
// becomes. The backend executes a plan step by step; the plan alone decides offsets, counts, peers,
// in-place handling and the event ordering around the NCCL calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/backend.hpp"

namespace mcr::detail::nccl {

// ---- groups -------------------------------------------------------------------------------------

/// Arguments to ncclCommSplit for one rank of the parent communicator. `members` is this rank's
/// own group; one split of the parent may form several disjoint groups at once (split(color) with
/// several colors: each rank passes its group's members), so the color is the parent rank of the
/// group's first member, equal within a group and different between groups. The key is the index
/// in `members`, so NCCL numbers the members exactly as the caller listed them, strided or
/// permuted groups included. Non-members pass NCCL_SPLIT_NOCOLOR (-1) and get no communicator.
struct SplitArgs {
  int color = -1;
  int key = 0;
};

/// Throws InvalidArgument when a member is out of [0, parent_size) or listed twice.
SplitArgs split_args(std::span<const int> members, int parent_rank, int parent_size);

/// Rank of `parent_rank` in the group formed by `members`: its index, or nullopt for non-members.
std::optional<int> group_rank(std::span<const int> members, int parent_rank) noexcept;

// ---- operation plans ----------------------------------------------------------------------------

/// Which memory a step touches. Device pointers are resolved when the plan runs: `input`/`output`
/// are the operation's buffers, `scratch` a stream-ordered temporary, `barrier_cell` the
/// communicator's one-element device buffer.
enum class Buffer : std::uint8_t { input, output, scratch, barrier_cell };

struct BufferRef {
  Buffer buffer = Buffer::input;
  std::size_t offset = 0;  ///< bytes
  friend bool operator==(const BufferRef&, const BufferRef&) = default;
};

enum class StepKind : std::uint8_t {
  order_after_caller,  ///< record an event on the caller's stream; the comm stream waits for it
  alloc_scratch,       ///< stream-ordered allocation of Plan::scratch_bytes on the comm stream
  copy,                ///< device-to-device copy of `count` bytes from `src` to `dst`
  group_start,         ///< ncclGroupStart
  send,                ///< ncclSend of `count` elements at `src` to `peer`
  recv,                ///< ncclRecv of `count` elements into `dst` from `peer`
  group_end,           ///< ncclGroupEnd
  collective,          ///< the native NCCL call for OpArgs::op (`peer` is the root when rooted)
  free_scratch,        ///< stream-ordered free of the scratch buffer
  record_completion,   ///< record the completion event on the comm stream
};

struct Step {
  StepKind kind = StepKind::order_after_caller;
  BufferRef src{};
  BufferRef dst{};
  std::size_t count = 0;  ///< elements, except for `copy` (bytes)
  int peer = -1;
  friend bool operator==(const Step&, const Step&) = default;
};

struct Plan {
  std::vector<Step> steps;
  std::size_t scratch_bytes = 0;
};

/// The steps of `args` on rank `rank` of a group of `size`. Every plan starts with
/// order_after_caller and ends with record_completion, so the operation reads its inputs only after
/// the caller's stream produced them, and a completion event marks the end of everything it wrote.
/// Throws UnsupportedError for what NCCL cannot express (a non-zero send/recv tag, a send/recv
/// with this rank itself).
Plan plan_operation(const OpArgs& args, int rank, int size);

/// Exclusive prefix sums of `counts` (the packed-in-rank-order displacements of the v-variants).
std::vector<std::size_t> displacements(const std::size_t* counts, int size);

}  // namespace mcr::detail::nccl
