// Communicator: every point-to-point and collective operation, each synchronous and asynchronous,
// running over whichever backend the selector picks for that operation and message size.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mcr/comm/observer.hpp"
#include "mcr/comm/selection.hpp"
#include "mcr/comm/store.hpp"
#include "mcr/comm/tensor.hpp"
#include "mcr/comm/types.hpp"
#include "mcr/comm/work.hpp"

namespace mcr {

class Communicator;
namespace detail {
class CommState;
/// The runtime's state behind a communicator, for the runtime's own parts (a composing backend
/// configuring its sub-communicators); throws InvalidArgument for an invalid one.
CommState& state_of(const Communicator& comm);
}  // namespace detail

/// Per-call options. All fields default to "use the communicator's setting".
struct CallOptions {
  /// Run on this backend ("mpi", "gloo", "nccl"), bypassing rules and tuning. Must be identical on
  /// every rank. An unsupported combination is an error naming backend, op and dtype.
  std::string_view backend{};
  /// Timeout for this call; zero means the communicator's default. Longer than 100 years (a
  /// caller's "never", milliseconds::max()) is 100 years.
  std::chrono::milliseconds timeout{0};
  /// Tag for send/recv (matched like an MPI tag). Must be >= 0.
  int tag = 0;
  /// all_to_all_v only: the message size (bytes) used to select a backend. Per-rank counts differ,
  /// so no size is known alike on every rank; pass an agreed figure (e.g. the total bytes of the
  /// exchange) to let size-based rules and tuning apply. Zero selects as for an empty message. A
  /// backend whose counts are ints (MPI) raises UnsupportedError for counts or displacements past
  /// INT_MAX elements; a size_hint that large keeps automatic selection off it.
  std::size_t size_hint = 0;
};

/// A group of ranks with a backend instance per usable backend. Cheap to copy (shared handle).
/// Contract, as with MPI and NCCL: every rank of the group issues the same sequence of operations,
/// with the same arguments that must agree (root, counts, dtype, backend override) and the same
/// sync/async form. Under that contract mixing backends never deadlocks (docs/design.md).
///
/// Lifetime: the group (its backends, threads and connections) lives while a Communicator copy or
/// a Work handle of one of its operations exists. When the last of them goes, the operations whose
/// handles were dropped are waited for (at most the communicator's timeout, progressing every
/// backend; a failure is printed on stderr, as nobody is left to raise it to), then the backends
/// are closed. So dropping a group blocks until its peers have joined its dropped operations.
///
/// Buffers: a synchronous call reads and writes its tensors only during the call, unless it raised
/// TimeoutError (then as for an asynchronous one that did, see Work). An asynchronous
/// call may read its inputs and write its outputs (and, for v-ops, read the counts) until its
/// Work's wait() returns or test() returns true; until then the caller must keep them valid and
/// must not write the inputs or read the outputs. Dropping the Work does not cancel the operation:
/// it goes on in the background (see Work), so its buffers must then stay valid until the group is
/// destroyed or finalize() returns.
class Communicator {
 public:
  /// An invalid communicator (e.g. what split() returns to a rank that passed kUndefinedColor).
  Communicator() = default;
  explicit Communicator(std::shared_ptr<detail::CommState> state) noexcept
      : state_(std::move(state)) {}

  static constexpr int kUndefinedColor = -1;

  bool valid() const noexcept { return state_ != nullptr; }
  int rank() const;
  int size() const;
  /// Rank of `group_rank` in the world communicator.
  int global_rank(int group_rank) const;
  /// Identifier equal on every member; distinct per communicator created in the job.
  std::uint64_t id() const;

  /// The default timeout of this communicator's operations. set_timeout() takes a positive one
  /// (else InvalidArgument); longer than 100 years is 100 years, as for CallOptions::timeout and
  /// Work::wait(timeout).
  std::chrono::milliseconds timeout() const;
  void set_timeout(std::chrono::milliseconds timeout);
  /// Hosts this communicator's ranks run on (from the host map every rank reports at start-up).
  int hosts() const;
  /// Ranks of this communicator on each of its hosts; 0 when hosts hold different numbers.
  int ranks_per_host() const;
  /// Index of this rank's host among the communicator's hosts, 0 .. hosts() - 1 (hosts numbered
  /// in the order of their lowest member).
  int host_index() const;
  /// This rank's position among the communicator's members on its host, 0 .. (ranks there) - 1.
  int local_rank() const;
  /// Backends instantiated on this communicator, in default priority order.
  std::vector<std::string> backends() const;
  /// The backend that would run `op` on `bytes` (the op's global message size), called in `form`
  /// (the blocking call or its i* counterpart), and why. `backend`: the call's
  /// CallOptions::backend (a forced backend; empty: mcr's selection).
  Selection explain(OpType op, DType dtype, std::size_t bytes, ReduceOp reduce = ReduceOp::sum,
                    Device device = Device::cpu(), CallForm form = CallForm::sync,
                    std::string_view backend = {}) const;
  /// Attach an observer for completed operations (nullptr detaches every observer). Sub-
  /// communicators created afterwards inherit it. Where MCR_LOG's log observes this communicator,
  /// `observer` is attached beside it, not in its place (else the log missed what followed).
  void set_observer(std::shared_ptr<OpObserver> observer);
  /// Pauses (false) or resumes (true) cross-rank verification of this communicator's collectives
  /// on the calling rank; peers must pause and resume at the same point. Only a communicator
  /// created with verification on (by default, or InitOptions::verify / MCR_VERIFY=1; not with
  /// MCR_VERIFY=0) can verify: set_verify(true) on another raises InvalidArgument. See
  /// docs/reliability.md.
  void set_verify(bool on);
  /// Whether this rank verifies the next collective.
  bool verifying() const;

  // ---- point to point ------------------------------------------------------------------------
  void send(const Tensor& tensor, int dst, const CallOptions& opts = {});
  void recv(const Tensor& tensor, int src, const CallOptions& opts = {});
  Work isend(const Tensor& tensor, int dst, const CallOptions& opts = {});
  Work irecv(const Tensor& tensor, int src, const CallOptions& opts = {});

  // ---- collectives ---------------------------------------------------------------------------
  // Out-of-place forms take (input, output); in-place forms either take one buffer or recognise an
  // input that aliases the caller's own slot of the output, as noted per operation. Every rank of a
  // collective uses the same form, in place or not, as MPI requires (cross-rank verification
  // compares it for all_reduce, where MPI's algorithm follows it: docs/mpi-backend.md).

  /// `tensor` is the source on `root` and the destination elsewhere.
  void broadcast(const Tensor& tensor, int root, const CallOptions& opts = {});
  Work ibroadcast(const Tensor& tensor, int root, const CallOptions& opts = {});

  /// `output` is written on `root` only (it may be empty elsewhere).
  void reduce(const Tensor& input, const Tensor& output, ReduceOp op, int root,
              const CallOptions& opts = {});
  void reduce(const Tensor& tensor, ReduceOp op, int root, const CallOptions& opts = {});
  Work ireduce(const Tensor& input, const Tensor& output, ReduceOp op, int root,
               const CallOptions& opts = {});
  Work ireduce(const Tensor& tensor, ReduceOp op, int root, const CallOptions& opts = {});

  void all_reduce(const Tensor& input, const Tensor& output, ReduceOp op,
                  const CallOptions& opts = {});
  void all_reduce(const Tensor& tensor, ReduceOp op, const CallOptions& opts = {});
  Work iall_reduce(const Tensor& input, const Tensor& output, ReduceOp op,
                   const CallOptions& opts = {});
  Work iall_reduce(const Tensor& tensor, ReduceOp op, const CallOptions& opts = {});

  /// output.count() == size() * input.count(). In place when input is output's slot rank().
  void all_gather(const Tensor& input, const Tensor& output, const CallOptions& opts = {});
  Work iall_gather(const Tensor& input, const Tensor& output, const CallOptions& opts = {});

  /// counts[r] elements come from rank r, packed in rank order; input.count() == counts[rank()].
  /// In place when input is output's slot rank().
  void all_gather_v(const Tensor& input, const Tensor& output, std::span<const std::size_t> counts,
                    const CallOptions& opts = {});
  Work iall_gather_v(const Tensor& input, const Tensor& output, std::span<const std::size_t> counts,
                     const CallOptions& opts = {});

  /// On root, output.count() == size() * input.count() (output ignored elsewhere). In place on
  /// root when input is output's slot root.
  void gather(const Tensor& input, const Tensor& output, int root, const CallOptions& opts = {});
  Work igather(const Tensor& input, const Tensor& output, int root, const CallOptions& opts = {});

  /// On root, input.count() == size() * output.count() (input ignored elsewhere). In place on
  /// root when output is input's slot root.
  void scatter(const Tensor& input, const Tensor& output, int root, const CallOptions& opts = {});
  Work iscatter(const Tensor& input, const Tensor& output, int root, const CallOptions& opts = {});

  /// input.count() == size() * output.count(); rank r receives the reduction of every rank's slot
  /// r. In place when output is input's slot rank().
  void reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op,
                      const CallOptions& opts = {});
  Work ireduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op,
                       const CallOptions& opts = {});

  /// input.count() == output.count() == size() * chunk; slot j of input goes to rank j. In place
  /// when input and output are the same buffer.
  void all_to_all(const Tensor& input, const Tensor& output, const CallOptions& opts = {});
  Work iall_to_all(const Tensor& input, const Tensor& output, const CallOptions& opts = {});

  /// send_counts[j] elements go to rank j and recv_counts[j] come from rank j, packed in rank
  /// order. In place when input and output are the same buffer (then send_counts == recv_counts).
  void all_to_all_v(const Tensor& input, std::span<const std::size_t> send_counts,
                    const Tensor& output, std::span<const std::size_t> recv_counts,
                    const CallOptions& opts = {});
  Work iall_to_all_v(const Tensor& input, std::span<const std::size_t> send_counts,
                     const Tensor& output, std::span<const std::size_t> recv_counts,
                     const CallOptions& opts = {});

  void barrier(const CallOptions& opts = {});
  Work ibarrier(const CallOptions& opts = {});

  // ---- groups --------------------------------------------------------------------------------
  /// Collective over this communicator: ranks with the same color form a new communicator,
  /// ordered by (key, rank). Ranks passing kUndefinedColor get an invalid communicator. Where a
  /// library fails to form the new group on some rank, every rank raises (that rank its own error,
  /// the others BackendError naming it), no rank goes on into the next library, and this
  /// communicator stays usable; the same holds for new_group() and member_group().
  Communicator split(int color, int key) const;
  /// Collective over this communicator: a communicator of `ranks` (ranks of this communicator; the
  /// new rank i is ranks[i]). Every rank passes the same list (another list on any rank, or
  /// split() there, raises MismatchError on every rank); non-members get an invalid one.
  Communicator new_group(std::span<const int> ranks) const;
  /// Collective over `ranks` only: the communicator of `ranks` (ranks of this communicator; the new
  /// rank i is ranks[i]), formed by its members alone. Ranks outside it do not call this and take
  /// no part, as torch's new_group(use_local_synchronization=True) and DeviceMesh expect. Every
  /// member passes the same list and the same `key` (the group's name, which the members compare;
  /// the same ranks may be formed again under the same key, after a failure or once the first
  /// group is gone: each formation is a group of its own), and the members form their groups of
  /// the same ranks in the same order. A member waits at most `timeout` (0: the runtime's store
  /// timeout, MCR_TIMEOUT) for the others; then every member, and one that arrives later, throws
  /// TimeoutError naming the members that had not arrived, and the next member_group() of these
  /// ranks works as usual. Throws InvalidArgument, before anything blocks, when this rank is not in
  /// `ranks`, or `ranks` is empty, out of range or repeats a rank; when `timeout` is negative,
  /// InvalidArgument on every member (the others naming this one), once the members met;
  /// MismatchError on every member when the members passed different keys (compared through the
  /// store before any library is called). This communicator may have been aborted by a timeout:
  /// the members meet through the store and each library forms the group afresh (Gloo through the
  /// store, MPI from the communicator's MPI communicator, whose abandoned operations do not take
  /// part), so a process can form new groups after a timeout, as torch's init_process_group after
  /// destroy_process_group does (mcr.torch). Not after an NCCL operation timed out: that aborted
  /// the NCCL communicator (ncclCommAbort), and NCCL's part raises BackendError on every member.
  /// Nor once finalize() abandoned this communicator after a failure: it raises.
  Communicator member_group(std::span<const int> ranks, std::string_view key,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds{0}) const;

 private:
  friend detail::CommState& detail::state_of(const Communicator& comm);
  detail::CommState& state() const;
  std::shared_ptr<detail::CommState> state_;
};

/// How init() sets the runtime up. Empty fields fall back to the environment variable named.
struct InitOptions {
  std::string
      rules;  ///< selection rules, e.g. "all_reduce:0-64K=mpi;all_to_all:*=gloo" (MCR_RULES)
  std::string rules_file;                ///< JSON rules file (MCR_RULES_FILE)
  std::string tuning_file;               ///< tuning table (MCR_TUNING)
  std::vector<std::string> backends;     ///< backends to bring up, in priority order (MCR_BACKENDS)
  std::chrono::milliseconds timeout{0};  ///< default per-operation timeout (MCR_TIMEOUT, seconds)
  /// Cross-rank verification: before a collective, the ranks exchange its op, dtype, count, root,
  /// reduce op, backend and form, and raise MismatchError on every rank when they differ. true:
  /// every collective (MCR_VERIFY=1; one small all-gather each). false: as MCR_VERIFY says, by
  /// default the first call of each distinct signature on each communicator (nothing in steady
  /// state); MCR_VERIFY=0 turns it off. Must agree on every rank.
  bool verify = false;

  /// A key-value store the ranks of the job already share (mcr/comm/store.hpp). When set, init()
  /// forms the world through it: the world exchange (unless MPI formed the world), Gloo's
  /// rendezvous, NCCL's unique ids, group formation, the timeout diagnostics and finalize()'s
  /// check-in. It starts no store server and needs no MCR_STORE_TOKEN (the store already belongs to
  /// the job), and MASTER_ADDR/MASTER_PORT are not read. `rank` and `size` must then be set; they
  /// take the place of the launcher's RANK/WORLD_SIZE. Every key mcr writes starts with "mcr/".
  std::shared_ptr<KeyValueStore> store;
  int rank = -1;  ///< with `store`: this process's rank, in [0, size)
  int size = 0;   ///< with `store`: the number of ranks in the world, >= 1
};

/// Reads the launcher environment (mpirun/mpiexec, Slurm srun, or RANK/WORLD_SIZE/MASTER_ADDR/
/// MASTER_PORT), brings up every usable backend and returns the world communicator. Collective.
/// Throws InvalidArgument naming the field and value, before anything blocks, when `options.store`
/// is set without a valid `rank` and `size`, or `rank`/`size` are set without a store.
Communicator init(const InitOptions& options = {});
/// Whether init() has run and succeeded, and finalize() has not. After an init() that raised, call
/// finalize() before init() again (init() raises until then, and runtime_info() with it).
bool is_initialized() noexcept;
/// Whether the thread that calls the runtime may change from one call to the next (one thread at a
/// time whatever the communicator, calls ordered by the caller, like MPI_THREAD_SERIALIZED; calls
/// on different communicators must not overlap either, docs/design.md "Threads"). True unless MPI
/// was initialised, by the application, at a lower thread level; then every call of the runtime
/// must come from the thread that initialised MPI.
bool any_thread_may_call() noexcept;
/// Tears the runtime down (finalizes MPI if init() initialised it). Collective, like MPI_Finalize:
/// every rank waits (at most the timeout) until all have called it, so that no rank closes its
/// connections while a peer still uses them. Idempotent.
///
/// Operations still in flight on any communicator (a Work not yet waited on, or one whose handle
/// was dropped) are waited for first, progressing every backend, all together at most the world
/// communicator's timeout: a peer may still need this rank's part of them, and their buffers stay
/// in use until then. If one of them fails or does not finish in time, finalize() still tears the
/// runtime down, and then raises that operation's error (TimeoutError naming op, sequence number
/// and backend, or BackendError). An error already raised to the caller is not raised again.
void finalize();

/// The timeout MCR_TIMEOUT sets, read and checked as init() reads it (InvalidArgument naming the
/// variable, its text and the rule when malformed); nullopt when it is unset or empty. For callers
/// that bound their own waits by it (the torch binding caps every group's timeout by it).
std::optional<std::chrono::milliseconds> timeout_from_environment();

/// This process is about to exit on an error of its own (an uncaught exception) while its peers
/// may still wait for it: finalize() then waits for no peer (as after a communication failure:
/// operations in flight are abandoned, Gloo connections closed, NCCL communicators aborted), and
/// under an MPI launcher leaves MPI unfinalized, so that the launcher ends the whole job at once
/// when this process exits, instead of every rank waiting out its timeout. `reason` is logged.
/// From then on the cross-rank check of a signature's first call (MCR_VERIFY) gives up at once
/// (Error, "cross-rank verification abandoned"), on any thread: its peers may never arrive.
/// The torch backend calls it from Python's excepthook. Thread-safe; no effect before init().
void exiting_on_error(std::string_view reason) noexcept;

}  // namespace mcr
