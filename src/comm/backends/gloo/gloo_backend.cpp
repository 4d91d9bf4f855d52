#include "backends/gloo/gloo_backend.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <system_error>

#include <fmt/format.h>
#include <gloo/barrier.h>
#include <gloo/config.h>
#include <gloo/context.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/device.h>

#include "backends/factories.hpp"
#include "backends/gloo/gloo_address.hpp"
#include "backends/gloo/gloo_check.hpp"
#include "backends/gloo/gloo_ops.hpp"
#include "backends/gloo/gloo_store.hpp"
#include "bootstrap/host.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail {
namespace {

// Used when the bootstrap carries no timeout: long enough for any real rendezvous.
constexpr std::chrono::milliseconds kFallbackTimeout = std::chrono::minutes(5);

// The tag of the barrier that ends a rendezvous, far from the collectives' tags (counted up from
// 0). A clash would be harmless anyway: the barrier completes before any collective starts.
constexpr std::uint32_t kConnectedBarrierTag = 0xFFFFFFFFu;

enum Status : int { kPending = 0, kDone = 1, kFailed = 2 };

struct CollectiveState {
  std::atomic<int> status{kPending};
  std::atomic<bool> abandoned{false};
  std::exception_ptr error;  // written before status becomes kFailed
  std::mutex mu;             // with `ended`: wakes a caller sleeping in block()
  std::condition_variable ended;

  void finish(int how) {
    status.store(how, std::memory_order_release);
    { std::lock_guard lock(mu); }  // a block() between its check and its sleep sees the status
    ended.notify_all();
    signal_operation_completed();
  }
};

class GlooCollectiveOp final : public PendingOp {
 public:
  GlooCollectiveOp(std::shared_ptr<CollectiveState> state, std::weak_ptr<GlooWorker> worker,
                   bool run_inline, std::chrono::milliseconds timeout)
      : state_(std::move(state)),
        worker_(std::move(worker)),
        run_inline_(run_inline),
        timeout_(timeout) {}
  bool test() override {
    switch (state_->status.load(std::memory_order_acquire)) {
      case kDone:
        return true;
      case kFailed:
        std::rethrow_exception(state_->error);
      default:
        return false;
    }
  }
  // A collective already running cannot be recalled from gloo (it ends at its own timeout); one
  // still queued is skipped, so it never touches the caller's buffers.
  void abandon() noexcept override { state_->abandoned.store(true); }
  bool signals_completion() const noexcept override { return true; }  // the worker's finish()

  // The caller waits as for a blocking call: it runs the collective itself when it is next in
  // line (where blocking collectives run inline, and unless the wait is shorter than the
  // collective's own timeout, which gloo enforces), else sleeps until the worker has run it.
  bool block(std::chrono::milliseconds limit) override {
    auto& s = *state_;
    if (s.status.load(std::memory_order_acquire) != kPending) return true;
    if (!run_inline_) return false;  // MCR_GLOO_INLINE=0: wait in the runtime's loop
    if (limit >= timeout_) {
      if (auto worker = worker_.lock(); worker && worker->run_if_next(state_.get())) return true;
    }
    std::unique_lock lock(s.mu);
    s.ended.wait_for(lock, limit,
                     [&] { return s.status.load(std::memory_order_acquire) != kPending; });
    return true;
  }

 private:
  std::shared_ptr<CollectiveState> state_;
  std::weak_ptr<GlooWorker> worker_;
  bool run_inline_;
  std::chrono::milliseconds timeout_;
};

// A gloo context of `size` ranks in which this process is `rank`, connected through the store
// under `prefix`. Only the members of the group take part.
std::shared_ptr<gloo::Context> connect_context(GlooShared& shared, int rank, int size,
                                               const std::string& prefix) {
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(shared.timeout);
  GlooStoreAdapter store(*shared.store, prefix, shared.timeout);
  const GlooCallSite site{"rendezvous", 0, rank};
  MCR_GLOO_CHECK(site, context->connectFullMesh(store, shared.device));
  // A rank leaves connectFullMesh once its own side of every pair is up, which can be before a
  // peer has read the handshake on its side. Were this rank then to destroy the context (a group
  // created and dropped at once, a world that only talks to itself), the peer's connect would fail
  // with "connection closed by peer". Nobody leaves this barrier before every rank has entered it,
  // so every rank's connect has returned by the time any context can go away.
  gloo::BarrierOptions connected(context);
  connected.setTag(kConnectedBarrierTag);
  connected.setTimeout(shared.timeout);
  const GlooCallSite barrier_site{"rendezvous barrier", 0, rank};
  MCR_GLOO_CHECK(barrier_site, gloo::barrier(connected));
  return context;
}

// Every rank's device address, as gloo prints a peer in its errors ("[127.0.0.1]:41234"), known
// to every rank, so that a lost peer is named by its rank (gloo_check.hpp). One device per process
// listens for every context, so the world's addresses serve every group.
void publish_peer_addresses(Bootstrap& bootstrap, gloo::Context& world) {
  std::string mine;
  if (world.size > 1) {
    mine = world.getPair(world.rank == 0 ? 1 : 0)->address().str();
    if (const auto seq = mine.find('$'); seq != std::string::npos) mine.resize(seq);
  }
  std::vector<std::string> all;
  for (const Bytes& b : bootstrap.exchange().all_gather(Bytes(mine.begin(), mine.end())))
    all.emplace_back(b.begin(), b.end());
  set_gloo_peer_addresses(std::move(all));
}

}  // namespace

std::string gloo_hostname(const LaunchInfo& launch) {
  if (const char* env = std::getenv("MCR_GLOO_HOSTNAME"); env != nullptr && *env != '\0') {
    return env;
  }
  if (const char* iface = std::getenv("MCR_GLOO_IFACE"); iface != nullptr && *iface != '\0') {
    return interface_address(iface, "MCR_GLOO_IFACE");
  }
  // The bootstrap's host identities (host name, boot id, network namespace), not the launcher's
  // local size: ranks in separate network namespaces of one machine cannot reach each other's
  // loopback although a launcher may count them as local.
  if (launch.single_host) return "127.0.0.1";
  // Several hosts. The interface that routes to the store host reaches the other ranks too (they
  // all reach the store); the host name is next, unless it names a loopback address (Debian maps
  // it to 127.0.1.1), which peers elsewhere could not connect to.
  const char* store_host = std::getenv("MCR_STORE_HOST");
  if (store_host != nullptr && *store_host != '\0') {
    // An interface name (eth0, ib0), as the store reads it (store_setup.cpp): the interface the
    // other hosts reach this one through. Resolving it as a host name would fail, silently.
    for (const auto& a : interface_addresses(store_host))
      if (resolve_ipv4(a) && !is_loopback_ipv4(a)) return a;
  }
  const std::string toward =
      store_host != nullptr && *store_host != '\0' ? store_host : launch.master_addr;
  if (!toward.empty()) {
    if (auto a = address_towards(toward); a && !is_loopback_ipv4(*a)) return *a;
  }
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) {
    throw BackendError(fmt::format("gloo: gethostname failed at {}:{}: {}", "gloo_backend.cpp",
                                   __LINE__,
                                   std::error_code(errno, std::generic_category()).message()));
  }
  if (auto a = resolve_ipv4(name); a && !is_loopback_ipv4(*a)) return name;
  if (auto a = first_external_address()) return *a;
  return name;
}

bool gloo_runs_inline() {
  const char* env = std::getenv("MCR_GLOO_INLINE");
  if (env == nullptr || *env == '\0') return true;
  const std::string v = env;
  if (v == "1") return true;
  if (v == "0") return false;
  throw InvalidArgument(
      fmt::format("MCR_GLOO_INLINE='{}': must be 1 (the caller runs and waits for its collectives "
                  "as gloo's own calls do; the default) or 0 (the backend's worker runs them and "
                  "the caller polls)",
                  v));
}

int gloo_collective_threads() {
  constexpr long long kMaxThreads = 64;
  const char* v = std::getenv("MCR_GLOO_THREADS");
  if (v == nullptr || *v == '\0') return 2;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || n < 1 || n > kMaxThreads) {
    throw InvalidArgument(fmt::format(
        "MCR_GLOO_THREADS='{}': must be a whole number of worker threads from 1 to {} (how many "
        "asynchronous Gloo collectives of one communicator run at once; default 2)",
        v, kMaxThreads));
  }
  return static_cast<int>(n);
}

void check_gloo_config() {
  gloo_runs_inline();
  gloo_collective_threads();
  // The interface must exist on this host; MCR_GLOO_HOSTNAME, when given, is used as it is.
  const char* hostname = std::getenv("MCR_GLOO_HOSTNAME");
  const char* iface = std::getenv("MCR_GLOO_IFACE");
  if ((hostname == nullptr || *hostname == '\0') && iface != nullptr && *iface != '\0') {
    interface_address(iface, "MCR_GLOO_IFACE");
  }
}

std::unique_ptr<Backend> GlooBackend::create_world(Bootstrap& bootstrap) {
  install_gloo_io_guard(bootstrap.rank());
  auto shared = std::make_shared<GlooShared>();
  shared->store = &bootstrap.store();
  shared->timeout = bootstrap.timeout().count() > 0 ? bootstrap.timeout() : kFallbackTimeout;
  shared->hostname = gloo_hostname(bootstrap.launch());
  shared->run_inline = gloo_runs_inline();
  shared->collective_threads = gloo_collective_threads();
  gloo::transport::tcp::attr attr;
  attr.hostname = shared->hostname;
  const GlooCallSite site{"create_device", 0, bootstrap.rank()};
  MCR_GLOO_CHECK(site, shared->device = gloo::transport::tcp::CreateDevice(attr));
  auto context = connect_context(*shared, bootstrap.rank(), bootstrap.size(), "gloo/world/");
  publish_peer_addresses(bootstrap, *context);
  return std::make_unique<GlooBackend>(std::move(shared), std::move(context));
}

GlooBackend::GlooBackend(std::shared_ptr<GlooShared> shared, std::shared_ptr<gloo::Context> context)
    : shared_(std::move(shared)),
      context_(std::move(context)),
      worker_(std::make_shared<GlooWorker>(shared_->collective_threads)) {}

GlooBackend::~GlooBackend() = default;

void GlooBackend::abort() noexcept {
  try {
    context_->closeConnections();
  } catch (...) {  // NOLINT(bugprone-empty-catch): aborting anyway; the process exits soon
  }
}

int GlooBackend::rank() const noexcept {
  return context_->rank;
}
int GlooBackend::size() const noexcept {
  return context_->size;
}

Support GlooBackend::supports(OpType op, DType dtype, ReduceOp reduce, Device::Kind device) const {
  if (device != Device::Kind::cpu) return Support::no("gloo backend handles CPU tensors only");
  if (is_reduction(op) && !reduce_op_valid_for(reduce, dtype)) {
    return Support::no(reduce == ReduceOp::avg ? "avg applies to floating types only"
                                               : "bitwise reductions apply to integer types only");
  }
  // Gloo 0.5 has no reduce-scatter on unbound buffers: an all-reduce keeps this rank's slot.
  if (op == OpType::reduce_scatter) return Support::yes("emulated");
  return Support::yes("native");
}

std::unique_ptr<PendingOp> GlooBackend::start(const OpArgs& args) {
  if (!args.device.is_cpu()) {
    throw UnsupportedError(fmt::format("gloo: {} on {} tensors: gloo handles CPU tensors only",
                                       args.op_name, to_string(args.device)));
  }
  const auto timeout = args.timeout.count() > 0 ? args.timeout : shared_->timeout;

  if (args.op == OpType::send || args.op == OpType::recv) {
    GlooP2P p;
    p.is_send = args.op == OpType::send;
    p.peer = args.root;
    p.data = p.is_send ? const_cast<void*>(args.in) : args.out;
    if (p.data == nullptr) p.data = p.is_send ? args.out : const_cast<void*>(args.in);
    p.bytes = args.count * dtype_size(args.dtype);
    p.tag = args.tag;
    p.timeout = timeout;
    p.site = {args.op_name, args.sequence, rank()};
    return start_gloo_p2p(*context_, waiters_, *self_, p, args.may_block);
  }

  auto collective = make_gloo_collective(args, size(), next_tag_++, timeout);
  if (moves_nothing(collective, size())) return nullptr;
  if (args.may_block && shared_->run_inline &&
      worker_->run_now_if_free([&] { run_gloo_collective(context_, collective); })) {
    return nullptr;
  }
  auto state = std::make_shared<CollectiveState>();
  const void* key = state.get();
  worker_->submit(
      [context = context_, c = std::move(collective), state](bool cancelled) {
        try {
          if (cancelled || state->abandoned.load()) {
            throw BackendError(
                fmt::format("gloo: {} #{} was {} before it ran", c.args.op_name, c.args.sequence,
                            cancelled ? "cancelled (backend shut down)" : "abandoned"));
          }
          run_gloo_collective(context, c);
          state->finish(kDone);
        } catch (...) {
          state->error = std::current_exception();
          state->finish(kFailed);
        }
      },
      key);
  return std::make_unique<GlooCollectiveOp>(std::move(state), worker_, shared_->run_inline,
                                            timeout);
}

std::unique_ptr<Backend> GlooBackend::split(const std::vector<int>& members,
                                            std::uint64_t group_id) {
  auto me = std::find(members.begin(), members.end(), rank());
  if (me == members.end()) return nullptr;  // non-members take no part in the new rendezvous
  const int new_rank = static_cast<int>(me - members.begin());
  auto context = connect_context(*shared_, new_rank, static_cast<int>(members.size()),
                                 fmt::format("gloo/{}/", group_id));
  return std::make_unique<GlooBackend>(shared_, std::move(context));
}

BackendFactory gloo_backend_factory() {
  return BackendFactory{
      "gloo",
      // Gloo needs nothing beyond the store, which every launch mode provides.
      [](const Bootstrap&) { return std::string(); },
      [](Bootstrap& bootstrap) { return GlooBackend::create_world(bootstrap); },
      [] {
        return fmt::format("Gloo {}.{}.{}", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR,
                           GLOO_VERSION_PATCH);
      },
      nullptr,
      &check_gloo_config,
  };
}

}  // namespace mcr::detail
