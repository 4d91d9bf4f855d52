// with_staging: lets a host-only backend (Gloo, MPI without CUDA support) take CUDA tensors.
// A staged operation is a small state machine advanced without ever blocking the host:
//   copy device input -> pinned host on the caller's stream, record an event
//   -> (event done) start the inner operation on the host buffers -> (inner done) copy the result
//   back on the caller's stream, record an event -> (event done) complete.
// It is advanced from test() and from the backend's progress(), so an operation nobody is waiting
// on still reaches its peers (the runtime progresses every backend from every wait).
// Every operation reaches the inner library in the order it was called (device/start_order.hpp):
// one called after a staged operation whose input is still on the device waits for it.
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/watchdog.hpp"
#include "device/cuda_check.hpp"
#include "device/device_queue.hpp"
#include "device/device_runtime.hpp"
#include "device/staging_plan.hpp"
#include "device/start_order.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail::device {
namespace {

/// Pinned host blocks reused across operations. Blocks are only freed with the pool: cudaFreeHost
/// synchronises the whole device, which could wait on a NCCL kernel that waits on a peer.
class PinnedPool {
 public:
  struct Block {
    char* data = nullptr;
    std::size_t bytes = 0;
  };

  // Retired blocks are not freed: a library that was given one may still write into it after the
  // communicator is gone (an MPI request cannot be recalled), so they stay until the process
  // exits (core/kept.hpp).
  ~PinnedPool() {
    for (auto& [bytes, data] : free_)
      (void)cudaFreeHost(data);
  }

  Block acquire(std::size_t bytes, const CallSite& site) {
    if (bytes == 0) return {};
    {
      std::lock_guard lock(mutex_);
      auto it = free_.lower_bound(bytes);
      if (it != free_.end()) {
        Block b{it->second, it->first};
        free_.erase(it);
        return b;
      }
    }
    std::size_t rounded = kMinBlock;
    while (rounded < bytes)
      rounded *= 2;
    void* data = nullptr;
    MCR_CUDA_CHECK(site, cudaMallocHost(&data, rounded));
    return {static_cast<char*>(data), rounded};
  }

  void release(Block b) noexcept {
    if (b.data == nullptr) return;
    std::lock_guard lock(mutex_);
    free_.emplace(b.bytes, b.data);
  }

  /// A block a timed-out operation may still be writing: never reused, never freed (given up to
  /// the process, as the inner backend's own buffers of such an operation are).
  void retire(Block b) noexcept { (void)b; }

 private:
  static constexpr std::size_t kMinBlock = 64 * 1024;
  std::mutex mutex_;
  std::multimap<std::size_t, char*> free_;
};

/// Starts `args` on `inner` later than the call that issued it (from some test() or progress()),
/// outside the runtime's own start(), which puts a blocking call under the watchdog: a synchronous
/// MPI collective cannot be interrupted, so it is put under the watchdog here as there, and a peer
/// that never comes ends the job with the reason instead of hanging it.
std::unique_ptr<PendingOp> start_later(Backend& inner, const OpArgs& args) {
  Watchdog& dog = Watchdog::instance();
  const bool arm = !args.async && !dog.armed();  // inside the runtime's start(): armed already
  if (arm) dog.arm(args.op_name, args.sequence, inner.name(), args.timeout, nullptr);
  try {
    auto op = inner.start(args);
    if (arm) dog.disarm();
    return op;
  } catch (...) {
    if (arm) dog.disarm();
    throw;
  }
}

/// An operation's arguments with their own copy of the counts arrays, which must outlive the call
/// that passed them where the inner operation starts later.
class HeldArgs {
 public:
  HeldArgs(const OpArgs& args, int size) : args_(args) {
    if (args.send_counts != nullptr) {
      send_counts_.assign(args.send_counts, args.send_counts + size);
      args_.send_counts = send_counts_.data();
    }
    if (args.recv_counts != nullptr) {
      recv_counts_.assign(args.recv_counts, args.recv_counts + size);
      args_.recv_counts = recv_counts_.data();
    }
  }
  HeldArgs(const HeldArgs&) = delete;  // args_ points into this object's vectors
  HeldArgs& operator=(const HeldArgs&) = delete;

  const OpArgs& get() const noexcept { return args_; }
  OpArgs& get() noexcept { return args_; }

 private:
  OpArgs args_;
  std::vector<std::size_t> send_counts_;
  std::vector<std::size_t> recv_counts_;
};

class StagedOp {
 public:
  StagedOp(Backend& inner, std::shared_ptr<PinnedPool> pool, std::shared_ptr<StartOrder> order,
           const OpArgs& args, int rank, int size)
      : inner_(inner),
        pool_(std::move(pool)),
        order_(std::move(order)),
        held_(args, size),
        args_(held_.get()),
        site_{rank, args.op_name},
        plan_(plan_staging(args, rank, size)) {
    stream_ = caller_stream(args.stream);
    DeviceGuard guard(args.device.index, site_);
    block_ = pool_->acquire(plan_.host_bytes, site_);
    bool copy_queued = false;
    try {
      MCR_CUDA_CHECK(site_, cudaEventCreateWithFlags(&copied_in_, cudaEventDisableTiming));
      MCR_CUDA_CHECK(site_, cudaEventCreateWithFlags(&copied_out_, cudaEventDisableTiming));
      if (plan_.copy_in.bytes != 0) {
        const char* src = static_cast<const char*>(args.in != nullptr ? args.in : args.out);
        copy_queued = true;  // from here the stream may write the block, even if the call fails
        MCR_CUDA_CHECK(site_,
                       cudaMemcpyAsync(block_.data + plan_.copy_in.host_offset,
                                       src + plan_.copy_in.device_offset, plan_.copy_in.bytes,
                                       cudaMemcpyDeviceToHost, stream_));
      }
      // Recorded even without a copy: the inner op then also starts after the caller's prior
      // work.
      MCR_CUDA_CHECK(site_, cudaEventRecord(copied_in_, stream_));
    } catch (...) {
      // No destructor runs for a constructor that throws: what was taken is given back here.
      if (copied_in_ != nullptr) (void)cudaEventDestroy(copied_in_);
      if (copied_out_ != nullptr) (void)cudaEventDestroy(copied_out_);
      if (copy_queued) {
        pool_->retire(block_);
      } else {
        pool_->release(block_);
      }
      throw;
    }
    // Last: once queued, another thread's advance may poll the event. Both functions read only what
    // is fixed by now, and the destructor takes the operation out of the queue before it goes.
    ticket_ = order_->enqueue([this] { return event_done(copied_in_); },
                              [this] { return start_later(inner_, host_args()); });
  }

  ~StagedOp() {
    if (ticket_) order_->cancel(*ticket_);
    if (copied_in_ != nullptr) (void)cudaEventDestroy(copied_in_);
    if (copied_out_ != nullptr) (void)cudaEventDestroy(copied_out_);
    if (phase_ == Phase::done) {
      pool_->release(block_);
    } else {
      pool_->retire(block_);  // a copy or the inner library may still touch it
    }
  }
  StagedOp(const StagedOp&) = delete;
  StagedOp& operator=(const StagedOp&) = delete;

  /// Moves as far as possible without blocking; true once complete. Rethrows a stored failure.
  bool advance() {
    std::lock_guard lock(mutex_);
    if (error_) std::rethrow_exception(error_);
    try {
      return step();
    } catch (...) {
      error_ = std::current_exception();
      phase_ = Phase::failed;
      throw;
    }
  }

  /// Advances for the backend's progress(): a failure is kept for test() to report.
  void advance_quietly() noexcept {
    try {
      (void)advance();
    } catch (...) {  // stored in error_
    }
  }

  bool finished() {
    std::lock_guard lock(mutex_);
    return phase_ == Phase::done || phase_ == Phase::failed;
  }

  void abandon() noexcept {
    std::lock_guard lock(mutex_);
    order_->cancel(*ticket_);  // not started: it never will be
    try {
      (void)order_->collect(*ticket_, inner_op_);
    } catch (...) {  // it failed to start: nothing to release
    }
    if (inner_op_) inner_op_->abandon();
    phase_ = Phase::failed;
  }

  bool stream_wait(void* stream) {
    std::lock_guard lock(mutex_);
    if (phase_ != Phase::copying_out && phase_ != Phase::done) return false;
    // A null stream is the current device's default stream: the tensor's device, whichever device
    // the calling thread has current.
    DeviceGuard guard(args_.device.index, site_);
    MCR_CUDA_CHECK(site_, cudaStreamWaitEvent(caller_stream(stream), copied_out_, 0));
    return true;
  }

 private:
  enum class Phase { copying_in, running, copying_out, done, failed };

  bool step() {
    if (phase_ == Phase::copying_in) {
      // Starts this operation once its input is on the host and everything called before it has
      // started (the earlier ones too, where they are ready).
      order_->advance();
      if (!order_->collect(*ticket_, inner_op_)) return false;
      phase_ = Phase::running;
    }
    if (phase_ == Phase::running) {
      if (inner_op_ && !inner_op_->test()) return false;
      inner_op_.reset();
      DeviceGuard guard(args_.device.index, site_);
      if (plan_.copy_out.bytes != 0) {
        char* dst =
            static_cast<char*>(args_.out != nullptr ? args_.out : const_cast<void*>(args_.in));
        MCR_CUDA_CHECK(
            site_, cudaMemcpyAsync(dst + plan_.copy_out.device_offset,
                                   block_.data + plan_.copy_out.host_offset, plan_.copy_out.bytes,
                                   cudaMemcpyHostToDevice, stream_));
      }
      MCR_CUDA_CHECK(site_, cudaEventRecord(copied_out_, stream_));
      phase_ = Phase::copying_out;
    }
    if (phase_ == Phase::copying_out) {
      if (!event_done(copied_out_)) return false;
      phase_ = Phase::done;
    }
    return phase_ == Phase::done;
  }

  bool event_done(cudaEvent_t event) {
    const cudaError_t status = cudaEventQuery(event);
    if (status == cudaSuccess) return true;
    if (status == cudaErrorNotReady) return false;
    throw_cuda_error("cudaEventQuery", __FILE__, __LINE__, site_, status);
  }

  OpArgs host_args() const {
    OpArgs host = args_;
    host.device = Device::cpu();
    host.stream = nullptr;
    host.in = args_.in != nullptr ? block_.data + plan_.host_in_offset : nullptr;
    host.out = args_.out != nullptr ? block_.data + plan_.host_out_offset : nullptr;
    return host;
  }

  Backend& inner_;
  std::shared_ptr<PinnedPool> pool_;
  std::shared_ptr<StartOrder> order_;
  HeldArgs held_;
  const OpArgs& args_;
  CallSite site_;
  StagingPlan plan_;
  std::shared_ptr<StartOrder::Ticket> ticket_;
  cudaStream_t stream_ = nullptr;
  PinnedPool::Block block_;
  cudaEvent_t copied_in_ = nullptr;
  cudaEvent_t copied_out_ = nullptr;
  std::unique_ptr<PendingOp> inner_op_;
  Phase phase_ = Phase::copying_in;
  std::exception_ptr error_;
  std::mutex mutex_;
};

class StagedPendingOp final : public PendingOp {
 public:
  explicit StagedPendingOp(std::shared_ptr<StagedOp> op) : op_(std::move(op)) {}
  bool test() override { return op_->advance(); }
  void abandon() noexcept override { op_->abandon(); }
  bool stream_wait(void* stream) override { return op_->stream_wait(stream); }

 private:
  std::shared_ptr<StagedOp> op_;
};

/// An operation the inner backend runs as given (host memory, or device memory it handles itself)
/// that was called while a staged operation called before it had not started: it starts right
/// after that one, from whichever test() or progress() starts the queue.
class QueuedPendingOp final : public PendingOp {
 public:
  QueuedPendingOp(std::shared_ptr<StartOrder> order, std::shared_ptr<StartOrder::Ticket> ticket)
      : order_(std::move(order)), ticket_(std::move(ticket)) {}
  ~QueuedPendingOp() override { order_->cancel(*ticket_); }

  bool test() override { return started() && (!op_ || op_->test()); }
  bool peek() override { return started() && (!op_ || op_->peek()); }
  void abandon() noexcept override {
    order_->cancel(*ticket_);
    try {
      (void)started();
    } catch (...) {  // it failed to start: nothing to release
    }
    if (op_) op_->abandon();
  }
  bool block(std::chrono::milliseconds limit) override {
    if (!started()) return false;
    return op_ ? op_->block(limit) : true;
  }
  bool signals_completion() const noexcept override { return op_ && op_->signals_completion(); }
  // No advance here: this may run on a thread without the right to call mcr.
  std::function<void()> library_wait() override {
    return op_ ? op_->library_wait() : std::function<void()>{};
  }
  bool stream_wait(void* stream) override { return started() && op_ && op_->stream_wait(stream); }

 private:
  /// Whether the inner operation has started (op_ then holds it; null: it completed in the call).
  bool started() {
    order_->advance();
    return order_->collect(*ticket_, op_);
  }

  std::shared_ptr<StartOrder> order_;
  std::shared_ptr<StartOrder::Ticket> ticket_;
  std::unique_ptr<PendingOp> op_;
};

class StagedBackend final : public Backend {
 public:
  explicit StagedBackend(std::unique_ptr<Backend> inner)
      : inner_(std::move(inner)), stages_anything_(stages_anything(*inner_)) {}
  ~StagedBackend() override {
    // Operations may outlive their backend; none may start on it once it is gone.
    order_->close("the operation never started: its communicator was destroyed before its turn");
  }
  StagedBackend(const StagedBackend&) = delete;
  StagedBackend& operator=(const StagedBackend&) = delete;

  std::string_view name() const noexcept override { return inner_->name(); }
  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  std::size_t max_count() const noexcept override { return inner_->max_count(); }
  bool blocks_device() const noexcept override { return inner_->blocks_device(); }
  bool reports_peer_loss() const noexcept override { return inner_->reports_peer_loss(); }
  void abort() noexcept override { inner_->abort(); }
  /// Staged operations advance only when polled, like MPI without a progress thread. A backend
  /// that runs everything natively on device memory (NCCL, CUDA-aware MPI) keeps its own answer.
  bool needs_host_progress() const noexcept override {
    return stages_anything_ || inner_->needs_host_progress();
  }
  /// Operations on host memory go to the inner backend unstaged, so they need what it needs: a
  /// Gloo operation on host memory must not count as pending host progress, or every wait in the
  /// process would poll instead of sleeping in Gloo's own wait, handing Gloo's waits to other
  /// threads (on a machine with a GPU, 1.4-1.7x raw Gloo's send/recv time, docs/gloo-backend.md).
  bool needs_host_progress_on(Device::Kind device) const noexcept override {
    if (device == Device::Kind::cpu) return inner_->needs_host_progress_on(device);
    return stages_anything_ || inner_->needs_host_progress_on(device);
  }

  Support supports(OpType op, DType dtype, ReduceOp reduce, Device::Kind device) const override {
    if (device == Device::Kind::cpu) return inner_->supports(op, dtype, reduce, device);
    const Support native = inner_->supports(op, dtype, reduce, Device::Kind::cuda);
    if (native.ok) return native;
    const Support host = inner_->supports(op, dtype, reduce, Device::Kind::cpu);
    return host.ok ? Support::yes("staged") : host;
  }

  std::unique_ptr<PendingOp> start(const OpArgs& args) override {
    if (args.device.is_cpu() || args.op == OpType::barrier ||
        inner_->supports(args.op, args.dtype, args.reduce, Device::Kind::cuda).ok) {
      std::unique_ptr<PendingOp> op;
      if (order_->start_if_idle([&] { return inner_->start(args); }, op)) return op;
      // A staged operation called earlier has not reached the library: this one goes after it.
      auto held = std::make_shared<HeldArgs>(args, size());
      held->get().may_block = false;  // it starts inside some other operation's test()
      auto queued = std::make_unique<QueuedPendingOp>(
          order_, order_->enqueue({}, [inner = inner_.get(), held] {
            return start_later(*inner, held->get());
          }));
      order_->advance();
      return queued;
    }
    auto op = std::make_shared<StagedOp>(*inner_, pool_, order_, args, rank(), size());
    // Try at once: when the device input is already there, the inner op starts in this call.
    op->advance();
    {
      std::lock_guard lock(mutex_);
      std::erase_if(in_flight_, [](const std::weak_ptr<StagedOp>& w) {
        auto s = w.lock();
        return !s || s->finished();
      });
      in_flight_.push_back(op);
    }
    return std::make_unique<StagedPendingOp>(std::move(op));
  }

  void progress() override {
    order_->advance();
    inner_->progress();
    std::vector<std::shared_ptr<StagedOp>> ops;
    {
      std::lock_guard lock(mutex_);
      for (auto& w : in_flight_) {
        if (auto s = w.lock()) ops.push_back(std::move(s));
      }
    }
    for (auto& op : ops)
      op->advance_quietly();
  }

  std::unique_ptr<Backend> split(const std::vector<int>& members, std::uint64_t group_id) override {
    start_everything_called();
    auto child = inner_->split(members, group_id);
    return child ? with_staging(std::move(child)) : nullptr;
  }
  std::unique_ptr<Backend> split_members(const std::vector<int>& members,
                                         std::uint64_t group_id) override {
    start_everything_called();
    auto child = inner_->split_members(members, group_id);
    return child ? with_staging(std::move(child)) : nullptr;
  }

 private:
  /// Whether some operation the inner backend runs on host memory lacks a native device path.
  static bool stages_anything(const Backend& inner) {
    for (OpType op : kAllOpTypes) {
      for (DType t : kAllDTypes) {
        for (ReduceOp r : kAllReduceOps) {
          if (inner.supports(op, t, r, Device::Kind::cpu).ok &&
              !inner.supports(op, t, r, Device::Kind::cuda).ok) {
            return true;
          }
        }
      }
    }
    return false;
  }

  /// Forming a group is collective in the inner library too, so it must come after every operation
  /// called before it there, as on every other rank: waits for the staged inputs still on the
  /// device (no peer is needed for that, only the caller's streams).
  void start_everything_called() {
    for (;;) {
      progress();
      if (order_->idle()) break;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    // An operation that did not start here may have started on the peers: a split now would be
    // matched with it there. Group formation turns this rank's error into every rank's.
    order_->throw_if_broken();
  }

  std::unique_ptr<Backend> inner_;
  bool stages_anything_;
  std::shared_ptr<StartOrder> order_ = std::make_shared<StartOrder>();
  // Shared with the operations, which may be destroyed after the backend.
  std::shared_ptr<PinnedPool> pool_ = std::make_shared<PinnedPool>();
  std::mutex mutex_;
  std::vector<std::weak_ptr<StagedOp>> in_flight_;
};

}  // namespace
}  // namespace mcr::detail::device

namespace mcr::detail::device {

std::unique_ptr<Backend> with_staging(std::unique_ptr<Backend> backend) {
  return std::make_unique<StagedBackend>(std::move(backend));
}

std::unique_ptr<Backend> with_staging_if_device(std::unique_ptr<Backend> backend) {
  // Without a device no tensor can be on one: skip the wrapper and its indirection on every call.
  if (count(Device::Kind::cuda) <= 0) return backend;
  return with_staging(std::move(backend));
}

}  // namespace mcr::detail::device
