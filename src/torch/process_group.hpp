// ProcessGroupMCR: the c10d backend "mcr" (a c10d::Backend, which torch wraps in a ProcessGroup per
// device). Every operation is staged on the caller's thread (contiguous buffers, argument checks
// torch can do locally, the CUDA stream it is ordered after) and issued on the communication
// thread (comm_thread.hpp), where mcr chooses the backend per operation and message size.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <mcr/comm/communicator.hpp>
#include "tensors.hpp"

namespace mcr::torch_ext {

/// What a c10d option struct says about an operation's waiting: its timeout (kUnsetTimeout: the
/// group's) and whether the caller waits for it at once (asyncOp false: a synchronous
/// torch.distributed call, which then waits on the posting thread without a hand-off).
struct Timing {
  std::chrono::milliseconds timeout{0};
  bool async = true;
};
template <class Options>
Timing timing(const Options& o) {
  return {o.timeout, o.asyncOp};
}

/// The handle torch gets back: completed on the communication thread, with a future (DDP and comm
/// hooks chain on it) holding the operation's output tensors.
class WorkMCR : public c10d::Work {
 public:
  /// `spin`: wait() polls for a short while before sleeping (see waiter_spins()).
  WorkMCR(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, bool spin);

  bool wait(std::chrono::milliseconds timeout) override;
  /// A handle polled or chained on, instead of waited on, takes its operation from the waiter's
  /// park (PostedOp::waiter) to the communication thread, which completes it.
  bool isCompleted() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override { return outputs_; }

  /// Called once, on the communication thread: fills the future and wakes waiters.
  void complete(std::exception_ptr error);
  /// This thread is running the callbacks chained on this Work's future (in complete(), which
  /// marks the Work completed after them).
  bool callbacks_running_here() const;

  /// When the last strong reference goes. The group keeps a weak reference to every posted Work
  /// (outstanding_), and a weak reference to a c10 intrusive_ptr keeps the object itself: what it
  /// holds (the output tensors, the future and its value) is let go here, not when the group's
  /// next post prunes the weak reference.
  void release_resources() override;

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool spin_;
};

/// Whether a waiting caller polls for completion briefly before sleeping on the work's condition
/// variable: only when this host has at least two hardware threads per local rank (the caller and
/// the communication thread each have one), the rule the runtime's Gloo backend uses for its
/// inline path. On an oversubscribed host the polling caller holds the core its own communication
/// thread or a peer rank needs: sleeping at once measured 12 us per 4-byte all_reduce against 16
/// us polling (2 ranks, 2 cores; docs/performance/torch.md#idle-rerun-async-table).
/// `local_ranks` 0: unknown (no poll).
bool waiter_spins(int local_ranks, unsigned hardware_threads);

/// How long a thread that posted an asynchronous operation and issued it itself polls it before
/// leaving it to the communication thread (PostedOp::caller_poll): 50 µs where the host has a core
/// to spare (`spin`, waiter_spins()) and the operation's output tensors hold at most `max_bytes`
/// (CommThread::caller_poll_max_bytes()); else 0, one look. A larger operation cannot finish
/// within the poll, which would only take that long from its caller: DDP posts its buckets from
/// the backward pass (docs/torch.md, "Threads").
std::chrono::microseconds caller_poll_for(bool spin, std::size_t bytes, std::size_t max_bytes);

/// The longest timeout the binding passes on or waits: 100 years. torch takes any timedelta (a
/// program may pass timedelta.max for "never"), and a deadline that far from now overflows the
/// clock, which made such an operation time out at once.
inline constexpr std::chrono::milliseconds kLongestTimeout = std::chrono::hours(24 * 365 * 100);
inline std::chrono::milliseconds bounded_timeout(std::chrono::milliseconds t) noexcept {
  return std::min(t, kLongestTimeout);
}

/// The timeout of a group's operations and of its formation (unless a call passes its own):
/// torch's (`timeout=` of init_process_group/new_group, 30 min by default; 0: none given), capped
/// by MCR_TIMEOUT when that is set (mcr::timeout_from_environment), so that the variable bounds
/// every mcr operation whatever the launch (docs/torch.md, "Errors and timeouts"), and by
/// kLongestTimeout.
std::chrono::milliseconds group_timeout(std::chrono::milliseconds torch_timeout);

/// The backend's options (ProcessGroupMCR::getBackendOptions): torch's own, in a type Python can
/// copy (split_group deep-copies the parent's options when given none; torch's base type has no
/// copy in Python).
struct OptionsMCR : c10d::Backend::Options {
  using Options::Options;
};

class ProcessGroupMCR : public c10d::Backend {
 public:
  /// `comm` must have been created on the communication thread; rank and size are torch's view of
  /// the group and must equal the communicator's.
  /// `local_ranks`: processes of the job on this host (the world's ranks per host; 0 unknown).
  ProcessGroupMCR(mcr::Communicator comm, int rank, int size, std::chrono::milliseconds timeout,
                  int local_ranks);
  ~ProcessGroupMCR() override;

  const std::string getBackendName() const override { return "mcr"; }
  /// torch's Backend.set_timeout (mcr.torch.set_timeout): later operations take `timeout`, capped
  /// as the group's own (group_timeout); operations already posted keep theirs.
  void setTimeout(std::chrono::milliseconds timeout) override {
    timeout_.store(group_timeout(timeout), std::memory_order_relaxed);
  }

  // Coalescing (torch's _coalescing_manager, batch_isend_irecv): the operations issued between
  // startCoalescing() and endCoalescing() are issued as they come, and the Work endCoalescing()
  // returns completes once all of them did (coalescing.cpp).
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  // Sequence numbers (TORCH_DISTRIBUTED_DEBUG=DETAIL compares them across ranks): operations
  // posted on this group since the last reset.
  void setSequenceNumberForGroup() override { sequence_.store(0); }
  uint64_t getSequenceNumberForGroup() override { return sequence_.load(); }

  /// torch's split_group (and DeviceMesh, which uses it once init_process_group bound a device):
  /// a group of `ranks` (this group's ranks, sorted) formed by its members alone
  /// (Communicator::member_group), with opts->timeout; nullptr on a rank outside `ranks`, which
  /// takes no part. ProcessGroup::splitGroup calls this once per device type the backend serves,
  /// with one store: a later call of the same split gets the group the first formed (split.cpp).
  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
  /// What split_group copies (copy.deepcopy) when given no options: the backend's name and this
  /// group's timeout.
  c10::intrusive_ptr<Options> getBackendOptions() override;

  /// destroy_process_group: operations already posted on this group complete (or time out), later
  /// ones fail at once. The runtime stays up for other groups and later init_process_group calls;
  /// it is finalized at exit or by mcr.torch.shutdown().
  void shutdown() override;
  /// As shutdown(), without waiting for the operations in flight.
  void abort() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  /// Functional collectives and DTensor use these even for one tensor (coalescing.cpp).
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  /// The backend every following operation (of every mcr group) is forced to, "" for automatic
  /// selection. Process-wide so that operations DDP issues from autograd threads see it too; must
  /// be set alike on every rank.
  static void set_backend_override(std::string backend);
  static std::string backend_override();

  const mcr::Communicator& communicator() const { return comm_; }
  std::chrono::milliseconds timeout() const { return timeout_.load(std::memory_order_relaxed); }

 private:
  using Start = std::function<mcr::Work(mcr::Communicator&, const mcr::CallOptions&)>;
  /// Posts `start` to the communication thread; `after` (copy-back into the user's tensors) runs
  /// there once the operation completed, before the work and its future complete.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                         Timing op_timing, Start start, std::function<void()> after,
                                         int tag = 0, const at::Tensor& order_by = {});
  std::chrono::milliseconds pick_timeout(std::chrono::milliseconds op_timeout) const;
  /// Refuses a call on a group that has shut down; for a call that changes a tensor in place
  /// before it posts (PREMUL_SUM's factor), so a refused call leaves the tensor as it was.
  void check_open();
  // The local checks of one (output, input) pair of an all-gather or a reduce-scatter, each op
  // alone or a coalesced batch, before anything is posted; the latter returns the reduction.
  void check_allgather_pair(const at::Tensor& output, const at::Tensor& input,
                            const char* op) const;
  Reduction check_reduce_scatter_pair(const at::Tensor& output, const at::Tensor& input,
                                      const c10d::ReduceOp& reduce, const char* op) const;
  /// One Work for several: completes when every one of `works` completed, with the first error;
  /// its result() holds theirs unless `keep_outputs` is false.
  c10::intrusive_ptr<c10d::Work> combine(c10d::OpType type,
                                         std::vector<c10::intrusive_ptr<c10d::Work>> works,
                                         bool keep_outputs = true);
  /// The collectives posted on this group that have not completed yet (no sends or receives).
  std::vector<c10::intrusive_ptr<c10d::Work>> outstanding_collectives();

  mcr::Communicator comm_;
  int local_ranks_;  // for the groups split from this one (waiter_spins)
  // The last group split from this one and the store of its split, for that split's call for the
  // next device type (split.cpp).
  std::mutex split_mu_;
  c10::weak_intrusive_ptr<c10d::Store> split_store_{c10::intrusive_ptr<c10d::Store>()};
  c10::weak_intrusive_ptr<c10d::Backend> split_made_{c10::intrusive_ptr<c10d::Backend>()};
  // Atomic: set_timeout may run on one thread while another posts (pick_timeout).
  std::atomic<std::chrono::milliseconds> timeout_;
  bool spin_wait_;
  std::atomic<std::uint64_t> sequence_{0};
  bool closed_ = false;  // shutdown()/abort(): later posts fail; under outstanding_mu_
  // Works posted since startCoalescing(), on the thread that coalesces (torch's caller).
  std::mutex coalescing_mu_;
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<c10d::Work>> coalesced_;
  // Posted and not yet completed, for shutdown() to wait on.
  std::mutex outstanding_mu_;
  std::vector<c10::weak_intrusive_ptr<c10d::Work>> outstanding_;
};

}  // namespace mcr::torch_ext
