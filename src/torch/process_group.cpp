// ProcessGroupMCR: work handles, the hand-off to the communication thread, the override switch.
#include "process_group.hpp"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>

#include <ATen/core/jit_type.h>
#include <c10/core/InferenceMode.h>

#include "comm_thread.hpp"
#include "device_order.hpp"
#include "release_gil.hpp"
#include "tensors.hpp"

namespace mcr::torch_ext {
namespace {

constexpr const char* kShutDown =
    "mcr: this process group has shut down (destroy_process_group or abort); create a new group";

std::mutex& override_mutex() {
  static std::mutex m;
  return m;
}
std::string& override_slot() {
  static std::string s;
  return s;
}

}  // namespace

bool waiter_spins(int local_ranks, unsigned hardware_threads) {
  return local_ranks > 0 && 2 * static_cast<unsigned>(local_ranks) <= hardware_threads;
}

std::chrono::microseconds caller_poll_for(bool spin, std::size_t bytes, std::size_t max_bytes) {
  return spin && bytes <= max_bytes ? std::chrono::microseconds(50) : std::chrono::microseconds(0);
}

WorkMCR::WorkMCR(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, bool spin)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors())),
      spin_(spin) {}

bool WorkMCR::wait(std::chrono::milliseconds timeout) {
  // With a core to spare, small messages finish within microseconds: poll briefly before sleeping
  // on the condition variable, whose wake-up alone costs more than a small all_reduce.
  // (c10d::Work::isCompleted: this thread is about to wait, so a parked operation stays parked.)
  if (spin_) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
    while (!c10d::Work::isCompleted() && std::chrono::steady_clock::now() < until)
      std::this_thread::yield();
  }
  // Then do the communication thread's work here until this operation completes, where this
  // thread may (CommThread::drive_until): the library's completion then wakes this thread itself.
  // torch's timeout (0: none) bounds it; Work::wait below raises when it ran out.
  if (!c10d::Work::isCompleted()) {
    using std::chrono::steady_clock;
    timeout = bounded_timeout(timeout);
    const bool bounded = timeout.count() > 0;
    const auto until = bounded ? steady_clock::now() + timeout : steady_clock::time_point::max();
    if (!CommThread::instance().drive_until([this] { return c10d::Work::isCompleted(); }, until,
                                            this) &&
        !c10d::Work::isCompleted()) {
      // This thread may not drive (it runs completion callbacks, or another holds the right to
      // call mcr): an operation parked for its waiter goes to the communication thread, as when
      // a handle is polled, else nobody would poll it.
      CommThread::instance().take_over_parked();
    }
    if (bounded) {  // what is left of it (at least 1 ms: 0 would mean no limit)
      timeout = std::max(
          std::chrono::duration_cast<std::chrono::milliseconds>(until - steady_clock::now()),
          std::chrono::milliseconds(1));
    }
  }
  return c10d::Work::wait(timeout);
}

bool WorkMCR::isCompleted() {
  if (c10d::Work::isCompleted()) return true;
  CommThread::instance().take_over_parked();
  return c10d::Work::isCompleted();
}

c10::intrusive_ptr<c10::ivalue::Future> WorkMCR::getFuture() {
  if (!c10d::Work::isCompleted()) CommThread::instance().take_over_parked();
  return future_;
}

namespace {

// The Works whose future's callbacks this thread is running (WorkMCR::complete), innermost last.
thread_local std::vector<const WorkMCR*> t_running_callbacks_of;

}  // namespace

void WorkMCR::complete(std::exception_ptr error) {
  // The future first: a waiter woken by finish() may read the future at once. Filling it runs the
  // callbacks chained on it, here.
  t_running_callbacks_of.push_back(this);
  struct Done {
    ~Done() { t_running_callbacks_of.pop_back(); }
  } done;
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  finish(error);
}

bool WorkMCR::callbacks_running_here() const {
  return std::find(t_running_callbacks_of.begin(), t_running_callbacks_of.end(), this) !=
         t_running_callbacks_of.end();
}

void WorkMCR::release_resources() {
  outputs_.clear();
  future_.reset();
}

std::chrono::milliseconds group_timeout(std::chrono::milliseconds torch_timeout) {
  torch_timeout = bounded_timeout(torch_timeout);
  // MCR_TIMEOUT itself, not the world's timeout: under torch that is the first group's
  // (world_timeout), which must not cap a later group's longer one.
  const auto cap = mcr::timeout_from_environment();
  if (!cap) return torch_timeout;
  if (torch_timeout.count() <= 0) return *cap;
  return std::min(torch_timeout, *cap);
}

ProcessGroupMCR::ProcessGroupMCR(mcr::Communicator comm, int rank, int size,
                                 std::chrono::milliseconds timeout, int local_ranks)
    : c10d::Backend(rank, size),
      comm_(std::move(comm)),
      local_ranks_(local_ranks),
      timeout_(group_timeout(timeout)),
      spin_wait_(waiter_spins(local_ranks, std::thread::hardware_concurrency())) {}

ProcessGroupMCR::~ProcessGroupMCR() {
  // The communicator's state must be destroyed on the communication thread (it drains its
  // operations through mcr). Once the runtime has shut down it is deliberately leaked instead.
  auto* held = new mcr::Communicator(std::move(comm_));
  CommThread::instance().post_task([held] { delete held; });
}

void ProcessGroupMCR::set_backend_override(std::string backend) {
  std::lock_guard lock(override_mutex());
  override_slot() = std::move(backend);
}

std::string ProcessGroupMCR::backend_override() {
  std::lock_guard lock(override_mutex());
  return override_slot();
}

std::chrono::milliseconds ProcessGroupMCR::pick_timeout(
    std::chrono::milliseconds op_timeout) const {
  return op_timeout.count() > 0 ? bounded_timeout(op_timeout) : timeout();
}

void ProcessGroupMCR::check_open() {
  std::lock_guard lock(outstanding_mu_);
  TORCH_CHECK(!closed_, kShutDown);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMCR::enqueue(c10d::OpType type,
                                                        std::vector<at::Tensor> outputs,
                                                        Timing op_timing, Start start,
                                                        std::function<void()> after, int tag,
                                                        const at::Tensor& order_by) {
  // Ordered after the work the caller's current stream holds now (CUDA tensors; null for CPU).
  const at::Tensor& device_tensor = order_by.defined() || outputs.empty() ? order_by : outputs[0];
  void* stream =
      device_tensor.defined() ? order_after_current_stream(device_tensor, "operation") : nullptr;
  std::size_t bytes = 0;
  for (const auto& t : outputs)
    bytes += t.defined() ? t.nbytes() : 0;
  auto work = c10::make_intrusive<WorkMCR>(rank_, type, std::move(outputs), spin_wait_);
  sequence_.fetch_add(1);
  const auto limit = pick_timeout(op_timing.timeout);
  PostedOp op;
  op.timeout = limit;
  op.caller_waits = !op_timing.async;
  op.waiter = work.get();
  op.caller_poll =
      caller_poll_for(spin_wait_, bytes, CommThread::instance().caller_poll_max_bytes());
  op.park_for_waiter = !spin_wait_;  // ranks share cores
  op.issue = [comm = comm_, backend = backend_override(), limit, tag, stream,
              start = std::move(start)]() mutable {
    mcr::CallOptions o;
    o.backend = backend;
    o.timeout = limit;
    o.tag = tag;
    IssueStream ordered(stream);
    return start(comm, o);
  };
  // The caller's inference mode as it posts: the copy-back may run on another thread (the
  // communication thread, a relief, a waiter), where writing into an inference tensor would
  // otherwise raise "Inplace update to inference tensor outside InferenceMode". (Only this flag:
  // the whole thread-local state would cost every operation a capture, and carry the caller's
  // Python modes onto threads that must not need the GIL.)
  op.complete = [work, after = std::move(after), inference = c10::InferenceMode::is_enabled(),
                 on_device =
                     stream != nullptr ? device_tensor : at::Tensor()](std::exception_ptr error) {
    if (!error && after) {
      try {
        std::optional<c10::InferenceMode> as_the_caller;
        if (inference) as_the_caller.emplace();
        // Copy-back writes into user tensors that may require grad: never recorded by autograd.
        at::NoGradGuard no_grad;
        run_copy_back(on_device, after);
      } catch (...) {
        error = std::current_exception();
      }
    }
    work->complete(error);
  };
  {
    std::lock_guard lock(outstanding_mu_);
    TORCH_CHECK(!closed_, kShutDown);
    std::erase_if(outstanding_, [](const auto& w) {
      auto p = w.lock();
      return !p || p->c10d::Work::isCompleted();  // a look that leaves a parked operation parked
    });
    outstanding_.emplace_back(work);
  }
  {
    std::lock_guard lock(coalescing_mu_);
    if (coalescing_) coalesced_.push_back(work);
  }
  CommThread::instance().post(std::move(op));
  return work;
}

std::vector<c10::intrusive_ptr<c10d::Work>> ProcessGroupMCR::outstanding_collectives() {
  std::vector<c10::intrusive_ptr<c10d::Work>> out;
  std::lock_guard lock(outstanding_mu_);
  for (auto& w : outstanding_) {
    auto p = w.lock();
    if (!p || p->c10d::Work::isCompleted()) continue;
    const auto type = p->retrieveOpType();
    if (type == c10d::OpType::SEND || type == c10d::OpType::RECV ||
        type == c10d::OpType::RECVANYSOURCE) {
      continue;
    }
    out.push_back(std::move(p));
  }
  return out;
}

void ProcessGroupMCR::shutdown() {
  // Called from Python (destroy_process_group) possibly holding the GIL, which the completion
  // callbacks of the operations waited for here may need.
  const ReleaseGilIfHeld no_gil;
  // Operations posted on this group complete (or fail at their timeouts) first, and so do those
  // their completion callbacks post meanwhile; the group closes once none is left. A Work
  // completes after the callbacks chained on its future: one of them may be what calls this
  // (destroy_process_group in a `.then()`), and that Work is not waited for on its own
  // callbacks' thread (it would wait for itself). Waited for from any other thread, it is: its
  // callbacks may still post on this group.
  for (;;) {
    std::vector<c10::intrusive_ptr<c10d::Work>> left;
    {
      std::lock_guard lock(outstanding_mu_);
      if (closed_) return;
      for (auto& w : outstanding_) {
        // Every Work this group posts is a WorkMCR (enqueue).
        auto p = w.lock();
        if (p && !p->isCompleted() && !static_cast<WorkMCR*>(p.get())->callbacks_running_here())
          left.push_back(std::move(p));
      }
      if (left.empty()) {
        outstanding_.clear();
        closed_ = true;
        return;
      }
    }
    for (auto& w : left) {
      try {
        w->wait();
      } catch (...) {  // NOLINT(bugprone-empty-catch): its caller sees the error from its own wait
      }
    }
  }
}

void ProcessGroupMCR::abort() {
  std::lock_guard lock(outstanding_mu_);
  closed_ = true;
}

}  // namespace mcr::torch_ext
