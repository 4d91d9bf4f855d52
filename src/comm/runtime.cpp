// init() / finalize(): launcher detection, bootstrap, backend bring-up, the world communicator.
#include "runtime.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "backend.hpp"
#include "bootstrap/store_exchange.hpp"
#include "comm_log_hooks.hpp"
#include "device/device_runtime.hpp"
#include "launch_hooks.hpp"
#include "log.hpp"
#include "mcr/errors.hpp"
#include "watchdog.hpp"

namespace mcr::detail {
namespace {

std::unique_ptr<Runtime>& runtime_slot() {
  static std::unique_ptr<Runtime> r;
  return r;
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument(fmt::format("{} '{}' cannot be opened", what, path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::chrono::milliseconds resolve_timeout(const InitOptions& o) {
  if (o.timeout.count() > 0) return o.timeout;
  if (const char* t = env("MCR_TIMEOUT")) {
    char* end = nullptr;
    const double s = std::strtod(t, &end);
    if (end == t || *end != '\0' || !(s > 0)) {
      throw InvalidArgument(fmt::format("MCR_TIMEOUT='{}' is not a positive number of seconds", t));
    }
    return std::chrono::milliseconds(static_cast<long long>(s * 1000));
  }
  return std::chrono::minutes(10);
}

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

Bytes to_bytes(std::string_view s) {
  return Bytes(s.begin(), s.end());
}
std::string from_bytes(const Bytes& b) {
  return std::string(b.begin(), b.end());
}

// The rendezvous store: a server on world rank 0; its address comes from MASTER_ADDR/MASTER_PORT
// (torchrun) or is published through the MPI exchange (mpirun, srun).
void start_store(Runtime& rt, std::unique_ptr<Exchange> mpi, std::chrono::milliseconds timeout) {
  const LaunchInfo& l = rt.launch;
  std::string host;
  int port = 0;
  if (mpi == nullptr) {
    host = l.launcher == Launcher::torchrun ? l.master_addr : "127.0.0.1";
    port = l.launcher == Launcher::torchrun ? l.master_port : 0;
    if (l.rank == 0) {
      rt.store_server =
          std::make_unique<TcpStoreServer>(l.size == 1 ? "127.0.0.1" : "0.0.0.0", port);
      port = rt.store_server->port();
    }
  } else {
    const std::string me = hostname();
    auto hosts = mpi->all_gather(to_bytes(me));
    bool one_host = true;
    for (const auto& h : hosts)
      one_host = one_host && from_bytes(h) == me;
    if (l.rank == 0) {
      rt.store_server = std::make_unique<TcpStoreServer>(one_host ? "127.0.0.1" : "0.0.0.0", 0);
      const char* advertised = env("MCR_STORE_HOST");
      host = advertised ? advertised : (one_host ? "127.0.0.1" : me);
      port = rt.store_server->port();
    }
    auto addrs = mpi->all_gather(to_bytes(l.rank == 0 ? fmt::format("{}:{}", host, port) : ""));
    const std::string addr = from_bytes(addrs[0]);
    const auto colon = addr.rfind(':');
    host = addr.substr(0, colon);
    port = std::stoi(addr.substr(colon + 1));
  }
  auto store = connect_tcp_store(host, port, timeout);
  std::unique_ptr<Exchange> exchange =
      mpi ? std::move(mpi) : make_store_exchange(*store, l.rank, l.size);
  rt.bootstrap = std::make_unique<Bootstrap>(l, std::move(exchange), std::move(store), timeout);
}

std::vector<std::string> split_list(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    auto c = s.find(',');
    auto item = s.substr(0, c);
    if (!item.empty()) out.emplace_back(item);
    if (c == std::string_view::npos) break;
    s.remove_prefix(c + 1);
  }
  return out;
}

}  // namespace

Runtime& runtime() {
  auto& r = runtime_slot();
  if (!r) throw Error("mcr::init() has not been called (or mcr::finalize() already ran)");
  return *r;
}

bool runtime_exists() noexcept {
  return runtime_slot() != nullptr;
}

bool debug_enabled() noexcept {
  static const bool on = env("MCR_DEBUG") != nullptr;
  return on;
}

void log_line(const std::string& line) {
  const int rank = runtime_exists() ? runtime_slot()->launch.rank : -1;
  fmt::print(stderr, "mcr[{}]: {}\n", rank, line);
}

std::shared_ptr<CommState> make_comm_state(int rank, int size, std::uint64_t id,
                                           std::vector<int> world_ranks,
                                           std::vector<std::unique_ptr<Backend>> backends,
                                           std::chrono::milliseconds timeout) {
  Runtime& rt = runtime();
  auto s = std::make_shared<CommState>();
  s->rank = rank;
  s->size = size;
  s->id = id;
  s->world_ranks = std::move(world_ranks);
  s->backends = std::move(backends);
  s->unusable = rt.unusable;
  s->timeout = timeout;
  std::vector<Backend*> raw;
  for (auto& b : s->backends) {
    raw.push_back(b.get());
    engine().register_backend(b.get());
  }
  s->selector = std::make_unique<Selector>(rt.rules, rt.table, raw, rt.unusable, size);

  // Cross-rank consistency (invariant 2): same rules, same table, same backends, everywhere.
  std::string names;
  for (Backend* b : raw)
    names += fmt::format("{},", b->name());
  const std::string mine = fmt::format("{:016x}|{}", s->selector->config_hash(), names);
  auto all = rt.bootstrap->group_all_gather(s->world_ranks, fmt::format("mcr/hash/{}", id),
                                            to_bytes(mine));
  std::string differ;
  const std::string first = from_bytes(all[0]);
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (from_bytes(all[r]) != first) differ += fmt::format("{}{}", differ.empty() ? "" : ", ", r);
  }
  if (!differ.empty()) {
    throw MismatchError(fmt::format(
        "communicator {}: ranks {} loaded different selection rules, tuning table or backends than "
        "rank 0 "
        "(hash|backends: rank 0 '{}', this rank {} '{}'); every rank must load the same MCR_RULES, "
        "MCR_RULES_FILE, MCR_TUNING and MCR_BACKENDS",
        id, differ, first, rank, mine));
  }
  return s;
}

}  // namespace mcr::detail

namespace mcr {

using namespace detail;

Communicator init(const InitOptions& options) {
  if (runtime_exists()) return Communicator(runtime().world);
  auto rt = std::make_unique<Runtime>();
  rt->launch = detect_launch();
  const auto timeout = resolve_timeout(options);

  // Selection inputs are parsed before anything blocks, so bad input fails on every rank alike.
  std::string rules_text =
      !options.rules.empty() ? options.rules : (env("MCR_RULES") ? env("MCR_RULES") : "");
  std::string rules_file = !options.rules_file.empty()
                               ? options.rules_file
                               : (env("MCR_RULES_FILE") ? env("MCR_RULES_FILE") : "");
  auto rules = std::make_shared<RuleSet>(RuleSet::parse(rules_text));
  if (!rules_file.empty()) {
    auto from_file = RuleSet::parse_json(read_file(rules_file, "rules file"));
    rules->rules.insert(rules->rules.end(), from_file.rules.begin(), from_file.rules.end());
  }
  rt->rules_source = rules_text.empty() && rules_file.empty()
                         ? "none"
                         : fmt::format("{}{}", rules_text.empty() ? "" : "string",
                                       rules_file.empty() ? "" : " file " + rules_file);
  rt->rules = rules;
  std::string table_file = !options.tuning_file.empty()
                               ? options.tuning_file
                               : (env("MCR_TUNING") ? env("MCR_TUNING") : "");
  if (!table_file.empty()) {
    rt->table = std::make_shared<TuningTable>(TuningTable::load(table_file));
    rt->table_source = table_file;
  }
  std::vector<std::string> wanted = options.backends;
  if (wanted.empty() && env("MCR_BACKENDS")) wanted = split_list(env("MCR_BACKENDS"));
  for (const auto& w : wanted) {
    bool known = false;
    for (const auto& f : compiled_backends())
      known = known || f.name == w;
    if (!known) {
      std::string names;
      for (const auto& f : compiled_backends())
        names += fmt::format("{}{}", names.empty() ? "" : ", ", f.name);
      throw InvalidArgument(
          fmt::format("backend '{}' (MCR_BACKENDS / InitOptions::backends) is not compiled "
                      "in; available: {}",
                      w, names));
    }
  }

  start_store(*rt, launcher_world_exchange(rt->launch), timeout);
  runtime_slot() = std::move(rt);
  Runtime& r = runtime();

  std::vector<std::unique_ptr<Backend>> backends;
  const auto& factories = compiled_backends();
  auto order = wanted;
  if (order.empty()) {
    for (const auto& f : factories)
      order.emplace_back(f.name);
  }
  for (const auto& name : order) {
    for (const auto& f : factories) {
      if (f.name != name) continue;
      std::string why = f.unusable_reason(*r.bootstrap);
      if (!why.empty()) {
        r.unusable.emplace_back(name, why);
        log_debug("backend {} unusable: {}", name, why);
        continue;
      }
      backends.push_back(device::with_staging_if_device(f.create_world(*r.bootstrap)));
    }
  }
  for (const auto& f : factories) {
    if (std::find(order.begin(), order.end(), f.name) == order.end()) {
      r.unusable.emplace_back(f.name, "not selected by MCR_BACKENDS / InitOptions::backends");
    }
  }
  if (backends.empty()) throw Error("no communication backend is usable in this process");
  std::vector<int> world(static_cast<std::size_t>(r.launch.size));
  for (int i = 0; i < r.launch.size; ++i)
    world[static_cast<std::size_t>(i)] = i;
  r.world = make_comm_state(r.launch.rank, r.launch.size, 0, std::move(world), std::move(backends),
                            timeout);
  Watchdog::instance().start();
  Communicator world_comm(r.world);
  attach_env_comm_log(world_comm);
  return world_comm;
}

bool is_initialized() noexcept {
  return runtime_exists();
}

namespace detail {
namespace {

// finalize() is collective, like MPI_Finalize. No rank tears down its backends while a peer may
// still be in an operation with it (a peer whose operation then times out must see a timeout, not
// a closed connection), and rank 0, whose process holds the store, does not close it while another
// rank is still in init (Gloo's rendezvous) or reading a new_group's keys. So every rank checks in
// and waits for all, bounded by the timeout.
//
// The check-in is a Gloo barrier on the world when the world has Gloo: a rank that died (or left)
// closed its connections, so the survivors learn it at once instead of waiting out the timeout for
// a check-in that never comes. It runs on the backend directly, even on a world aborted by a
// timeout, because whether a rank aborted is its own view: every rank must choose the same way to
// check in. Otherwise it goes through the store; a rank that never arrives has failed, and its
// launcher ends the job.
void gloo_check_in(CommState& world, Backend& gloo) {
  OpArgs a;
  a.op = OpType::barrier;
  a.op_name = to_string(OpType::barrier);
  a.sequence = world.next_sequence++;
  a.timeout = world.timeout;
  a.async = true;  // never blocks: polled below with every backend progressed
  std::unique_ptr<PendingOp> pending = gloo.start(a);
  const auto deadline = Clock::now() + a.timeout;
  while (pending && !pending->test()) {
    if (Clock::now() > deadline) {
      pending->abandon();
      throw TimeoutError(fmt::format("barrier (sequence #{}) on backend 'gloo' did not complete "
                                     "within {} ms",
                                     a.sequence, a.timeout.count()),
                         "barrier", a.sequence, "gloo");
    }
    engine().progress_all();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void wait_for_all_ranks(Runtime& r) noexcept {
  if (!r.bootstrap || r.launch.size <= 1) return;
  if (r.world) {
    for (const auto& b : r.world->backends) {
      if (b->name() != "gloo") continue;
      try {
        gloo_check_in(*r.world, *b);
      } catch (const std::exception& e) {  // finalize must not throw: say why and leave
        log_line(fmt::format("finalize: not every rank checked in (a rank exited or died?): {}",
                             e.what()));
      }
      return;
    }
  }
  try {
    Store& store = r.bootstrap->store();
    if (store.add("mcr/finalize", 1) == r.launch.size) store.set("mcr/finalize/all", {1});
    (void)store.get("mcr/finalize/all", r.bootstrap->timeout());
  } catch (const std::exception& e) {  // finalize must not throw: say why and leave
    log_debug("finalize: not every rank checked in: {}", e.what());
  }
}

}  // namespace
}  // namespace detail

void finalize() {
  auto& slot = detail::runtime_slot();
  if (!slot) return;
  // Operations still in flight on any communicator (handles not waited yet, or dropped) finish
  // first: a peer may still need this rank's part of them, and their buffers are the caller's.
  // The wait is bounded by the world's timeout; what fails or does not finish in it is raised once
  // the runtime is torn down, so that finalize() never returns over a silent failure.
  const auto limit = slot->world ? slot->world->timeout : std::chrono::milliseconds(600'000);
  const std::exception_ptr unfinished = detail::engine().drain_all(detail::Clock::now() + limit);
  if (slot->world) {
    Communicator world(slot->world);
    finish_env_comm_log(world);
  }
  Watchdog::instance().stop();
  detail::wait_for_all_ranks(*slot);
  slot->world.reset();
  slot.reset();
  detail::shutdown_launchers();
  if (unfinished) std::rethrow_exception(unfinished);
}

}  // namespace mcr
