// The NCCL backend: device tensors only, every operation enqueued on the device's communication
// stream after the caller's stream, completion observed through an event (never a host block).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "backends/factories.hpp"
#include "backends/nccl/nccl_check.hpp"
#include "backends/nccl/nccl_ops.hpp"
#include "backends/nccl/nccl_types.hpp"
#include "bootstrap/bootstrap.hpp"
#include "core/library_error.hpp"
#include "core/store_wait.hpp"
#include "device/device_queue.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail::nccl {

using device::caller_stream;
using device::DeviceGuard;
using device::DeviceQueue;

namespace {

/// One NCCL communicator and what its operations share. Pending operations hold it too, so a
/// handle that outlives its backend still has a valid communicator to query.
class CommContext {
 public:
  CommContext(ncclComm_t comm, int rank, int size, std::shared_ptr<DeviceQueue> queue)
      : comm_(comm), rank_(rank), size_(size), queue_(std::move(queue)) {
    const CallSite site{rank_, "init"};
    DeviceGuard guard(queue_->device(), site);
    MCR_CUDA_CHECK(site, cudaMalloc(&barrier_cell_, sizeof(float)));
    try {
      MCR_CUDA_CHECK(site, cudaMemset(barrier_cell_, 0, sizeof(float)));
    } catch (...) {
      (void)cudaFree(barrier_cell_);  // no destructor runs for a constructor that throws
      throw;
    }
  }

  ~CommContext() {
    const CallSite site{rank_, "destroy"};
    try {
      DeviceGuard guard(queue_->device(), site);
      if (!broken_.load()) {
        // Finalize waits for this communicator's enqueued work; then the resources go.
        (void)ncclCommFinalize(comm_);
        (void)ncclCommDestroy(comm_);
      }
      (void)cudaFree(barrier_cell_);
    } catch (const Error&) {
      // Teardown after the CUDA runtime is gone: nothing left to release.
    }
  }
  CommContext(const CommContext&) = delete;
  CommContext& operator=(const CommContext&) = delete;

  ncclComm_t comm() const noexcept { return comm_; }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  int device() const noexcept { return queue_->device(); }
  DeviceQueue& queue() const noexcept { return *queue_; }
  const std::shared_ptr<DeviceQueue>& shared_queue() const noexcept { return queue_; }
  void* barrier_cell() const noexcept { return barrier_cell_; }

  /// Raises the reason this communicator stopped working, if it did.
  void check_usable(std::string_view op) const {
    if (!broken_.load()) return;
    std::lock_guard lock(mutex_);
    throw BackendError(fmt::format("NCCL {} on rank {}: the communicator is unusable: {}", op,
                                   rank_, broken_reason_));
  }

  /// Aborts the communicator once (ncclCommAbort also stops its kernels); later calls fail fast.
  void abort(const std::string& reason) noexcept {
    std::lock_guard lock(mutex_);
    if (broken_.exchange(true)) return;
    broken_reason_ = reason;
    int previous = -1;
    const bool have_previous = cudaGetDevice(&previous) == cudaSuccess;
    (void)cudaSetDevice(device());
    (void)ncclCommAbort(comm_);
    if (have_previous) (void)cudaSetDevice(previous);
  }

  /// Non-blocking check for an asynchronous NCCL failure (a peer died, a network error...).
  void check_async_error(std::string_view op) {
    check_usable(op);
    ncclResult_t async = ncclSuccess;
    const CallSite site{rank_, op};
    MCR_NCCL_CHECK(site, comm_, ncclCommGetAsyncError(comm_, &async));
    if (async == ncclSuccess || async == ncclInProgress) return;
    const char* last = ncclGetLastError(comm_);
    // In the one format of every library error (the call that reported it, file:line, rank, op).
    std::string message = format_call_error(
        "ncclCommGetAsyncError", __FILE__, __LINE__, site, nccl_result_name(async),
        ncclGetErrorString(async),
        fmt::format("{}{}the operation failed asynchronously and the communicator was aborted",
                    last != nullptr && *last != '\0' ? "last NCCL error: " : "",
                    last != nullptr && *last != '\0' ? fmt::format("{}; ", last) : ""));
    abort(message);
    throw BackendError(message);
  }

 private:
  ncclComm_t comm_;
  int rank_;
  int size_;
  std::shared_ptr<DeviceQueue> queue_;
  void* barrier_cell_ = nullptr;
  std::atomic<bool> broken_{false};
  mutable std::mutex mutex_;
  std::string broken_reason_;
};

/// The context that owns `comm` from here on. A communicator no context could take (its barrier
/// cell not allocated: device memory exhausted) is aborted, not left holding its resources and
/// connections.
std::shared_ptr<CommContext> adopt(ncclComm_t comm, int rank, int size,
                                   std::shared_ptr<DeviceQueue> queue) {
  try {
    return std::make_shared<CommContext>(comm, rank, size, std::move(queue));
  } catch (...) {
    (void)ncclCommAbort(comm);
    throw;
  }
}

class NcclPendingOp final : public PendingOp {
 public:
  NcclPendingOp(std::shared_ptr<CommContext> ctx, std::string_view op)
      : ctx_(std::move(ctx)), op_(op), done_(ctx_->queue().acquire_event({ctx_->rank(), op})) {}
  ~NcclPendingOp() override {
    if (abandoned_) {
      (void)cudaEventDestroy(done_);
    } else {
      ctx_->queue().release_event(done_);
    }
  }
  NcclPendingOp(const NcclPendingOp&) = delete;
  NcclPendingOp& operator=(const NcclPendingOp&) = delete;

  cudaEvent_t done_event() const noexcept { return done_; }

  bool test() override {
    ctx_->check_async_error(op_);
    const cudaError_t status = cudaEventQuery(done_);
    if (status == cudaSuccess) {
      completed_.store(true);
      return true;
    }
    if (status == cudaErrorNotReady) return false;
    device::throw_cuda_error("cudaEventQuery", __FILE__, __LINE__, CallSite{ctx_->rank(), op_},
                             status);
  }

  void abandon() noexcept override {
    abandoned_ = true;
    ctx_->abort(fmt::format("{} timed out; ncclCommAbort was called", op_));
  }

  bool stream_wait(void* stream) override {
    // An aborted communicator's kernels stopped where they were and the stream went on, so this
    // operation's event fired whether or not its outputs were written: after an abort, only an
    // operation seen complete before (by test()) lets the caller's stream go on.
    if (!completed_.load()) ctx_->check_usable(op_);
    const CallSite site{ctx_->rank(), op_};
    // A null stream is the current device's default stream: this communicator's device, whichever
    // device the calling thread has current.
    DeviceGuard guard(ctx_->device(), site);
    MCR_CUDA_CHECK(site, cudaStreamWaitEvent(caller_stream(stream), done_, 0));
    return true;
  }

 private:
  std::shared_ptr<CommContext> ctx_;
  std::string_view op_;
  cudaEvent_t done_;
  bool abandoned_ = false;
  std::atomic<bool> completed_{false};  ///< test() saw its event fire
};

/// Issues one NCCL call for the native collectives.
void run_collective(const OpArgs& args, const CommContext& ctx, const void* src, void* dst,
                    std::size_t count, int root, cudaStream_t stream, const CallSite& site) {
  ncclComm_t comm = ctx.comm();
  const ncclDataType_t type = to_nccl(args.dtype);
  const auto reduce = [&] {
    const auto op = to_nccl(args.reduce);
    if (!op) {
      throw UnsupportedError(fmt::format("NCCL {}: reduce op {} has no NCCL operator", site.op,
                                         to_string(args.reduce)));
    }
    return *op;
  };
  switch (args.op) {
    case OpType::broadcast:
      MCR_NCCL_CHECK(site, comm, ncclBroadcast(src, dst, count, type, root, comm, stream));
      break;
    case OpType::reduce:
      MCR_NCCL_CHECK(site, comm, ncclReduce(src, dst, count, type, reduce(), root, comm, stream));
      break;
    case OpType::all_reduce:
      MCR_NCCL_CHECK(site, comm, ncclAllReduce(src, dst, count, type, reduce(), comm, stream));
      break;
    case OpType::all_gather:
      MCR_NCCL_CHECK(site, comm, ncclAllGather(src, dst, count, type, comm, stream));
      break;
    case OpType::reduce_scatter:
      MCR_NCCL_CHECK(site, comm, ncclReduceScatter(src, dst, count, type, reduce(), comm, stream));
      break;
    case OpType::barrier:
      MCR_NCCL_CHECK(site, comm, ncclAllReduce(src, dst, 1, ncclFloat32, ncclSum, comm, stream));
      break;
    default:
      throw BackendError(fmt::format("NCCL {}: no native collective (internal error)", site.op));
  }
}

// The unique id of a new NCCL communicator, made by `first` and read by the others from the store.
ncclUniqueId exchange_unique_id(Store& store, const std::string& key, bool first, int rank,
                                std::chrono::milliseconds timeout, const CallSite& site) {
  ncclUniqueId id{};
  if (first) {
    MCR_NCCL_CHECK(site, nullptr, ncclGetUniqueId(&id));
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(&id);
    store.set(key, Bytes(bytes, bytes + sizeof(id)));
    return id;
  }
  // A member group's id: peers may wait on this rank's operations in flight before they arrive.
  const Bytes bytes = get_progressing(store, key, timeout);
  if (bytes.size() != sizeof(id)) {
    throw MismatchError(
        fmt::format("NCCL init on rank {}: unique id under '{}' has {} bytes, this NCCL expects {} "
                    "(different NCCL versions across ranks?)",
                    rank, key, bytes.size(), sizeof(id)));
  }
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<std::uint8_t*>(&id));
  return id;
}

class NcclBackend final : public Backend {
 public:
  /// `store` (the job's rendezvous, which outlives every backend) forms groups by members alone.
  NcclBackend(std::shared_ptr<CommContext> ctx, Store* store, std::chrono::milliseconds timeout)
      : ctx_(std::move(ctx)), store_(store), timeout_(timeout) {}

  std::string_view name() const noexcept override { return "nccl"; }
  int rank() const noexcept override { return ctx_->rank(); }
  int size() const noexcept override { return ctx_->size(); }
  bool blocks_device() const noexcept override { return true; }
  void abort() noexcept override { ctx_->abort("finalize() after a failure of this process"); }

  Support supports(OpType op, DType dtype, ReduceOp reduce, Device::Kind device) const override {
    return nccl_support(op, dtype, reduce, device);
  }

  std::unique_ptr<PendingOp> start(const OpArgs& args) override {
    const std::string_view op_name = args.op_name.empty() ? to_string(args.op) : args.op_name;
    const CallSite site{rank(), op_name};
    ctx_->check_usable(op_name);
    if (args.device.is_cuda() && args.device.index != ctx_->device()) {
      throw InvalidArgument(fmt::format(
          "NCCL {} on rank {}: tensor is on {} but this communicator is bound to cuda:{} "
          "(local rank modulo device count)",
          op_name, rank(), to_string(args.device), ctx_->device()));
    }
    if (args.device.is_cpu() && args.op != OpType::barrier) {
      throw UnsupportedError(
          fmt::format("NCCL {}: CPU tensors are not supported ({})", op_name,
                      nccl_support(args.op, args.dtype, args.reduce, Device::Kind::cpu).why));
    }
    const Plan plan = plan_operation(args, rank(), size());
    DeviceGuard guard(ctx_->device(), site);
    auto op = std::make_unique<NcclPendingOp>(ctx_, op_name);
    execute(plan, args, *op, site);
    return op;
  }

  std::unique_ptr<Backend> split(const std::vector<int>& members, std::uint64_t group_id) override {
    const CallSite site{rank(), "split"};
    ctx_->check_usable("split");
    const SplitArgs s = split_args(members, rank(), size());
    DeviceGuard guard(ctx_->device(), site);
    ncclComm_t child = nullptr;
    // Collective over the parent: non-members take part with NCCL_SPLIT_NOCOLOR and get no comm.
    MCR_NCCL_CHECK(site, ctx_->comm(),
                   ncclCommSplit(ctx_->comm(), s.color < 0 ? NCCL_SPLIT_NOCOLOR : s.color, s.key,
                                 &child, nullptr));
    if (s.color < 0 || child == nullptr) return nullptr;
    int child_rank = -1;
    try {
      MCR_NCCL_CHECK(site, child, ncclCommUserRank(child, &child_rank));
    } catch (...) {
      (void)ncclCommAbort(child);  // the error read its last message first
      throw;
    }
    if (child_rank != s.key) {
      (void)ncclCommDestroy(child);
      throw BackendError(fmt::format(
          "NCCL split of group {} on rank {}: NCCL numbered this rank {} but the group lists it at "
          "index {}",
          group_id, rank(), child_rank, s.key));
    }
    return std::make_unique<NcclBackend>(
        adopt(child, s.key, static_cast<int>(members.size()), ctx_->shared_queue()), store_,
        timeout_);
  }

  // ncclCommSplit needs every rank of the parent; a group of its members alone is a new
  // communicator, its unique id passed through the store by the first member.
  std::unique_ptr<Backend> split_members(const std::vector<int>& members,
                                         std::uint64_t group_id) override {
    const CallSite site{rank(), "split"};
    ctx_->check_usable("split");
    const auto me = std::find(members.begin(), members.end(), rank());
    if (me == members.end()) return nullptr;
    const int index = static_cast<int>(me - members.begin());
    const ncclUniqueId id = exchange_unique_id(*store_, fmt::format("nccl/{}/uid", group_id),
                                               index == 0, rank(), timeout_, site);
    DeviceGuard guard(ctx_->device(), site);
    ncclComm_t child = nullptr;
    MCR_NCCL_CHECK(site, nullptr,
                   ncclCommInitRank(&child, static_cast<int>(members.size()), id, index));
    return std::make_unique<NcclBackend>(
        adopt(child, index, static_cast<int>(members.size()), ctx_->shared_queue()), store_,
        timeout_);
  }

 private:
  void execute(const Plan& plan, const OpArgs& args, NcclPendingOp& op, const CallSite& site) {
    cudaStream_t stream = ctx_->queue().stream();
    const ncclDataType_t type = to_nccl(args.dtype);
    ncclComm_t comm = ctx_->comm();
    void* scratch = nullptr;
    bool in_group = false;
    const auto resolve = [&](BufferRef ref) -> char* {
      char* base = nullptr;
      switch (ref.buffer) {
        case Buffer::input:
          base = static_cast<char*>(const_cast<void*>(args.in));
          break;
        case Buffer::output:
          base = static_cast<char*>(args.out);
          break;
        case Buffer::scratch:
          base = static_cast<char*>(scratch);
          break;
        case Buffer::barrier_cell:
          base = static_cast<char*>(ctx_->barrier_cell());
          break;
      }
      return base + ref.offset;
    };
    try {
      for (const Step& step : plan.steps) {
        switch (step.kind) {
          case StepKind::order_after_caller:
            ctx_->queue().order_after(caller_stream(args.stream), site);
            break;
          case StepKind::alloc_scratch:
            // Stream-ordered: unlike cudaMalloc/cudaFree it never synchronises the device, which
            // could wait on a NCCL kernel that waits on a peer.
            MCR_CUDA_CHECK(site, cudaMallocAsync(&scratch, plan.scratch_bytes, stream));
            break;
          case StepKind::copy:
            MCR_CUDA_CHECK(site, cudaMemcpyAsync(resolve(step.dst), resolve(step.src), step.count,
                                                 cudaMemcpyDeviceToDevice, stream));
            break;
          case StepKind::group_start:
            MCR_NCCL_CHECK(site, comm, ncclGroupStart());
            in_group = true;
            break;
          case StepKind::group_end:
            in_group = false;
            MCR_NCCL_CHECK(site, comm, ncclGroupEnd());
            break;
          case StepKind::send:
            MCR_NCCL_CHECK(site, comm,
                           ncclSend(resolve(step.src), step.count, type, step.peer, comm, stream));
            break;
          case StepKind::recv:
            MCR_NCCL_CHECK(site, comm,
                           ncclRecv(resolve(step.dst), step.count, type, step.peer, comm, stream));
            break;
          case StepKind::collective:
            run_collective(args, *ctx_, resolve(step.src), resolve(step.dst), step.count, step.peer,
                           stream, site);
            break;
          case StepKind::free_scratch:
            MCR_CUDA_CHECK(site, cudaFreeAsync(scratch, stream));
            scratch = nullptr;
            break;
          case StepKind::record_completion:
            MCR_CUDA_CHECK(site, cudaEventRecord(op.done_event(), stream));
            break;
        }
      }
    } catch (...) {
      if (in_group) (void)ncclGroupEnd();
      if (scratch != nullptr) (void)cudaFreeAsync(scratch, stream);
      throw;
    }
  }

  std::shared_ptr<CommContext> ctx_;
  Store* store_;
  std::chrono::milliseconds timeout_;
};

std::string unusable_reason(const Bootstrap& bootstrap) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    return unusable_reason_for(cudaGetErrorName(status), cudaGetErrorString(status), 0,
                               bootstrap.launch().local_size);
  }
  return unusable_reason_for({}, {}, count, bootstrap.launch().local_size);
}

std::unique_ptr<Backend> create_world(Bootstrap& bootstrap) {
  const int rank = bootstrap.rank();
  const CallSite site{rank, "init"};
  int count = 0;
  MCR_CUDA_CHECK(site, cudaGetDeviceCount(&count));
  if (count <= 0) throw BackendError("NCCL init: cudaGetDeviceCount found 0 devices");
  // Ranks are packed per node in launch order, so the local rank picks the device. It stays the
  // process's current device, as the application's own CUDA calls expect.
  const int device = bootstrap.launch().local_rank % count;
  MCR_CUDA_CHECK(site, cudaSetDevice(device));

  const ncclUniqueId id = exchange_unique_id(bootstrap.store(), "nccl/world/uid", rank == 0, rank,
                                             bootstrap.timeout(), site);
  auto queue = DeviceQueue::for_device(device, site);
  ncclComm_t comm = nullptr;
  MCR_NCCL_CHECK(site, nullptr, ncclCommInitRank(&comm, bootstrap.size(), id, rank));
  return std::make_unique<NcclBackend>(adopt(comm, rank, bootstrap.size(), std::move(queue)),
                                       &bootstrap.store(), bootstrap.timeout());
}

std::string library_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "NCCL (version unknown)";
  // NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z since 2.9.
  return fmt::format("NCCL {}.{}.{}", v / 10000, v / 100 % 100, v % 100);
}

}  // namespace
}  // namespace mcr::detail::nccl

namespace mcr::detail {

BackendFactory nccl_backend_factory() {
  return {"nccl", &nccl::unusable_reason, &nccl::create_world, &nccl::library_version};
}

}  // namespace mcr::detail
