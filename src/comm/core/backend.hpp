// The one abstract interface every backend implements (architecture invariant 1).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mcr/comm/selection.hpp"
#include "mcr/comm/types.hpp"

namespace mcr::detail {

class Bootstrap;

/// A fully validated operation, in group ranks. The communicator checks every argument before a
/// backend sees it, so backends may assume consistency (non-null buffers when counts are non-zero,
/// roots in range, counts arrays of group size, etc.).
///
/// Meaning of `count` per op (elements):
///   send/recv/broadcast/reduce/all_reduce: the buffer length
///   all_gather/gather: each rank's contribution (input length)
///   scatter/reduce_scatter: each rank's share (output length)
///   all_to_all: the chunk sent to each peer (input length / group size)
///   all_gather_v/all_to_all_v/barrier: unused (see send_counts/recv_counts)
/// `in_place` (the output slot aliasing described in communicator.hpp) is set only for ops that
/// allow it. For gather/scatter, `out`/`in` respectively are null on non-root ranks.
struct OpArgs {
  OpType op = OpType::barrier;
  DType dtype = DType::u8;
  ReduceOp reduce = ReduceOp::sum;
  Device device{};
  void* stream = nullptr;
  const void* in = nullptr;
  void* out = nullptr;
  std::size_t count = 0;
  bool in_place = false;
  int root = 0;  ///< root of rooted collectives; the peer of send/recv
  int tag = 0;
  const std::size_t* send_counts = nullptr;  ///< all_to_all_v: per peer; all_gather_v: per rank
  const std::size_t* recv_counts = nullptr;  ///< all_to_all_v: per peer
  std::uint64_t sequence = 0;
  /// The caller asked for the asynchronous form. A backend must then not block indefinitely.
  bool async = false;
  /// The runtime allows completing the operation inside start() in the calling thread: the call is
  /// synchronous and no backend that needs host progress has pending work (docs/design.md).
  bool may_block = false;
  /// This operation's timeout; a backend that blocks must give up after it (raise TimeoutError).
  std::chrono::milliseconds timeout{0};
  /// Name of the op for messages ("all_reduce"); static storage.
  std::string_view op_name;
};

/// Result of a capability query.
struct Support {
  bool ok = false;
  std::string_view how;  ///< when ok: "native", "staged", "emulated"... shown by `mcr info`
  std::string_view why;  ///< when not ok: the reason, e.g. "no bf16 reduction in this MPI"

  static constexpr Support yes(std::string_view how = "native") { return {true, how, {}}; }
  static constexpr Support no(std::string_view why) { return {false, {}, why}; }
};

/// One in-flight operation of a backend.
class PendingOp {
 public:
  virtual ~PendingOp() = default;
  /// Non-blocking completion check; true once outputs are final. Throws BackendError on failure.
  virtual bool test() = 0;
  /// test() for a look in passing (the runtime tidying up its list of operations): it must not
  /// start work that only a waiter needs, such as a thread that waits for the library.
  virtual bool peek() { return test(); }
  /// Called once when the operation timed out: release what can be released without blocking.
  virtual void abandon() noexcept {}
  /// Sleeps in the calling thread until the operation has completed or failed, or about `limit`
  /// has passed, where the library progresses on its own and can wake a sleeping waiter; returns
  /// false at once where it cannot (the caller then polls test()). After true, test() tells how
  /// it ended. The runtime calls it only while no backend needs this thread's host progress.
  virtual bool block(std::chrono::milliseconds limit) {
    (void)limit;
    return false;
  }
  /// True where a library thread calls signal_operation_completed() once this operation has
  /// completed or failed, after which test() says so: a progress thread may then sleep until
  /// signalled instead of polling. Only after the first test(), which may start that thread.
  virtual bool signals_completion() const noexcept { return false; }
  /// Work::library_wait(): a function that blocks in the library until this operation has
  /// completed or failed (or its timeout passed), safe on a thread that does not hold the right to
  /// call mcr, and valid after this object is gone. Empty (the default) where there is none.
  virtual std::function<void()> library_wait() { return {}; }
  /// Makes `stream` wait for this operation on the device without blocking the host. Returns false
  /// when the backend has no device-side completion (then the caller waits on the host).
  virtual bool stream_wait(void* stream) {
    (void)stream;
    return false;
  }
};

/// Called by a library thread each time an operation whose signals_completion() is true has
/// completed or failed: wakes the listener set with mcr::set_completion_signal(), if any.
void signal_operation_completed() noexcept;

/// A backend instance bound to one group of ranks.
class Backend {
 public:
  virtual ~Backend() = default;
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  /// Lower-case name used in rules, tables, logs and errors: "mpi", "gloo", "nccl".
  virtual std::string_view name() const noexcept = 0;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;

  /// Capability query. The default answers "unsupported" for everything not overridden.
  virtual Support supports(OpType op, DType dtype, ReduceOp reduce, Device::Kind device) const {
    (void)op, (void)dtype, (void)reduce, (void)device;
    return Support::no("not implemented by this backend");
  }
  /// Largest element count one call can carry (MPI's int counts, for instance).
  virtual std::size_t max_count() const noexcept { return static_cast<std::size_t>(-1); }

  /// Starts `args`. Returns nullptr when the operation already completed in this call (blocking
  /// fast path), else a handle to poll. Must not block indefinitely when `args.async` is true.
  virtual std::unique_ptr<PendingOp> start(const OpArgs& args) = 0;

  /// True when operations of this backend advance only while the host calls into its library
  /// (MPI without an asynchronous progress thread). The runtime then progresses it from every wait
  /// and never blocks in another library while it has pending work (docs/design.md).
  virtual bool needs_host_progress() const noexcept { return false; }
  /// The same for an operation on memory of `device`: a backend that needs host progress only for
  /// some memory (a staging wrapper: only its staged device operations) says so here, and the
  /// runtime counts, waits for and blocks beside each operation by this answer.
  virtual bool needs_host_progress_on(Device::Kind device) const noexcept {
    (void)device;
    return needs_host_progress();
  }
  /// Advances pending operations; called from every wait loop. Must not block.
  virtual void progress() {}

  /// True when an operation may hold a device until all peers join it (NCCL, CUDA-aware MPI).
  /// Two such backends are never in flight on the same device at once: the runtime fences between
  /// them.
  virtual bool blocks_device() const noexcept { return false; }

  /// True when a peer that exits or dies makes this backend's pending operations fail at once
  /// (its connections close, as Gloo's TCP pairs do), rather than after their timeout. finalize()
  /// then checks in with a barrier on it, so survivors of a lost rank learn it promptly.
  virtual bool reports_peer_loss() const noexcept { return false; }

  /// Called once, by finalize() after this process saw a communication failure (docs/
  /// reliability.md, "Finalize after a failure"): make whatever is pending fail without waiting
  /// for peers, and close what peers may be blocked on (Gloo closes its connections, NCCL aborts
  /// its communicator). Must not block. A library that cannot abandon its operations (MPI) does
  /// nothing here; the runtime then never finalizes it.
  virtual void abort() noexcept {}

  /// True for a backend that composes each operation from steps that flat backends of
  /// sub-communicators run (hier). It comes after the flat backends of its communicator, and a
  /// blocking call is never held back for it (its own steps are what would have to finish).
  virtual bool composes() const noexcept { return false; }
  /// For a composed backend: whether operations it accepted are still in flight. Before a call
  /// that may block this thread inside a library, the runtime progresses every backend until no
  /// composed backend is busy (docs/design.md, "Composed operations", rule 7).
  virtual bool busy_composing() const noexcept { return false; }
  /// Collective over this backend's communicator: called on each of its backends, in order, once
  /// at the end of the communicator's creation. A composed backend forms its sub-communicators
  /// here, so that no operation blocks to form them; communicators created inside this call get
  /// no composed backend and no verifier of their own (they run steps of composed operations).
  virtual void finish_creation() {}

  /// A backend that composes an operation from steps on sub-communicators (hier): each step of
  /// `op` on `bytes` with the library its sub-communicator would choose and why, for explain().
  /// Empty for backends that run operations themselves.
  virtual std::vector<HierStep> explain_steps(OpType op, DType dtype, std::size_t bytes,
                                              ReduceOp reduce) const {
    (void)op, (void)dtype, (void)bytes, (void)reduce;
    return {};
  }

  /// Collective over this backend's group: every rank calls it. Returns the backend of the new
  /// group formed by `members` (ranks of this group, in new-rank order), or nullptr on ranks not in
  /// `members`. `group_id` is equal on all ranks and unique per group (used for rendezvous keys).
  virtual std::unique_ptr<Backend> split(const std::vector<int>& members,
                                         std::uint64_t group_id) = 0;

  /// Collective over `members` only (ranks of this group, in new-rank order; this rank is one of
  /// them): the same group as split(), formed without the other ranks of this group, which do not
  /// call it. `group_id` as for split(). Returns nullptr when this library cannot form a group
  /// that way; the new communicator then goes without it (equally on every member).
  virtual std::unique_ptr<Backend> split_members(const std::vector<int>& members,
                                                 std::uint64_t group_id) {
    (void)members, (void)group_id;
    return nullptr;
  }
};

class Exchange;
struct LaunchInfo;

/// How a library that can form the job's world (MPI under mpirun/srun) takes part in bring-up and
/// teardown. Returned by its factory, so the core never names the library.
class LaunchSupport {
 public:
  virtual ~LaunchSupport() = default;
  /// When the launcher formed a world this library can use, initialises the library and returns a
  /// world exchange over it; otherwise nullptr.
  virtual std::unique_ptr<Exchange> world_exchange(const LaunchInfo& launch) = 0;
  /// Undoes what world_exchange() initialised; nothing when it initialised nothing.
  virtual void shutdown() noexcept = 0;
  /// Whether shutdown() is still safe after this process saw a failure: false when an operation
  /// of the library was abandoned and cannot be cancelled (the library would progress it into
  /// freed memory, and wait for peers that may never come). The runtime then leaves the library
  /// initialised and the launcher ends the job when the process exits.
  virtual bool may_shut_down_after_failure() const noexcept { return true; }
  /// Ends the whole job after an unrecoverable error when the library is up (MPI_Abort); returns
  /// when it is not, so that the caller can try the next way out.
  virtual void abort_job(int code) noexcept = 0;
  /// Whether the library, as initialised, accepts calls from whichever thread holds a communicator
  /// (one thread at a time: MPI_THREAD_SERIALIZED or above). True when it is not initialised.
  virtual bool any_thread_may_call() const noexcept { return true; }
};

/// Creates the world instance of one backend, or explains why it is unusable in this process.
struct BackendFactory {
  std::string_view name;
  /// Empty when usable; otherwise the reason (shown by `mcr info`).
  std::string (*unusable_reason)(const Bootstrap& bootstrap);
  std::unique_ptr<Backend> (*create_world)(Bootstrap& bootstrap);
  /// The library and its version, for `mcr info` and tuning-table provenance ("Open MPI v4.1.4").
  std::string (*library_version)();
  /// The library's launch support (static storage), or nullptr when it has none.
  LaunchSupport* (*launch_support)() = nullptr;
  /// Reads and checks the backend's own inputs (its environment variables) before anything blocks,
  /// throwing InvalidArgument naming the input; nullptr when it has none. init() calls it for
  /// every selected backend with the runtime's inputs, so that a rank whose value is bad raises
  /// with its peers instead of alone inside create_world while they wait there.
  void (*check_config)() = nullptr;
};

/// Every backend compiled into this build, in default priority order (backends/registry.cpp).
const std::vector<BackendFactory>& compiled_backends();

class CommState;

/// Creates the composed backend of one kind (hier) on each communicator, over the flat backends
/// that communicator holds. Registered beside the flat ones (backends/registry.cpp), so that the
/// runtime brings it up, configures it and checks its configuration across ranks without naming
/// it.
struct ComposedBackendFactory {
  std::string_view name;
  /// The environment variable that configures it ("MCR_HIER"), named in the cross-rank check.
  std::string_view config_source;
  /// Reads and checks its configuration before anything blocks (throws InvalidArgument naming the
  /// input); returns the canonical text that every rank compares and create() receives.
  std::string (*read_config)();
  /// Its backend for `comm`, whose flat backends are `flat` (priority order), configured by
  /// `config`; or nullptr, with the reason in `why`, where it cannot compose on `comm`.
  std::unique_ptr<Backend> (*create)(CommState& comm, std::vector<Backend*> flat,
                                     const std::string& config, std::string& why);
};

/// Every composed backend of this build (backends/registry.cpp); they come after the flat ones.
const std::vector<ComposedBackendFactory>& composed_backends();

/// The names of every backend compiled into this build, flat and composed, in priority order.
std::vector<std::string> compiled_backend_names();

}  // namespace mcr::detail
