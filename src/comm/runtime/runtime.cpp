// init() / finalize(): launcher detection, bootstrap, backend bring-up, the world communicator.
#include "runtime/runtime.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "bootstrap/store_setup.hpp"
#include "core/backend.hpp"
#include "core/failure.hpp"
#include "core/log.hpp"
#include "core/store_wait.hpp"
#include "core/watchdog.hpp"
#include "device/device_runtime.hpp"
#include "mcr/errors.hpp"
#include "observe/comm_log_hooks.hpp"
#include "observe/flight_registry.hpp"
#include "observe/verify.hpp"
#include "runtime/init_inputs.hpp"
#include "runtime/launch_hooks.hpp"
#include "runtime/process_memory.hpp"
#include "runtime/process_signals.hpp"

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

// True while a backend's finish_creation() creates communicators on this thread (a composed
// backend's sub-communicators): they run steps of composed operations, so they get no composed
// backend (a step must run on a flat backend, and simulated hosts would otherwise nest) and no
// verifier (their steps follow from an operation verified on the communicator composed for).
// Thread-local: communicators may be created on several threads.
thread_local bool creating_parts = false;

// Composed backends go last (after every flat one, so default priority never prefers them), over
// the flat ones, and only where they can compose; elsewhere selection explains why they are not
// there.
void add_composed_backends(const Runtime& rt, CommState& s) {
  std::vector<Backend*> flat;
  for (auto& b : s.backends)
    flat.push_back(b.get());
  for (const ComposedChoice& c : rt.composed) {
    if (!c.wanted) continue;  // init() listed it as unusable already
    const std::string name(c.factory->name);
    if (creating_parts) {
      s.unusable.emplace_back(name, "a sub-communicator of a composed backend itself");
      continue;
    }
    std::string why;
    if (auto b = c.factory->create(s, flat, c.config, why)) {
      s.backends.push_back(std::move(b));
    } else {
      s.unusable.emplace_back(name, std::move(why));
    }
  }
}

// Collective over the new communicator: each backend's finish_creation(), in order.
void finish_backends_creation(CommState& s) {
  const bool outer = creating_parts;
  creating_parts = true;
  struct Restore {
    bool value;
    ~Restore() { creating_parts = value; }
  } restore{outer};
  for (auto& b : s.backends)
    b->finish_creation();
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

Runtime& initialized_runtime() {
  Runtime& r = runtime();
  if (!r.world) {
    throw Error(
        "mcr::init() failed in this process (see the error it raised); call mcr::finalize() "
        "before calling init() again");
  }
  return r;
}

bool debug_enabled() noexcept {
  // Off unless set to something other than "0" (the docs write MCR_DEBUG=1).
  static const bool on = [] {
    const char* v = env("MCR_DEBUG");
    return v != nullptr && *v != '\0' && std::string_view(v) != "0";
  }();
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
  s->topology = group_topology(rt.bootstrap->host_of_rank(), s->world_ranks);
  s->backends = std::move(backends);
  s->unusable = rt.unusable;
  add_composed_backends(rt, *s);
  s->timeout = timeout;
  s->flight.attach(id, rank, size, s->world_ranks);
  std::vector<Backend*> raw;
  for (auto& b : s->backends) {
    raw.push_back(b.get());
    engine().register_backend(b.get());
  }
  s->selector =
      std::make_unique<Selector>(rt.rules, rt.table, raw, s->unusable, size,
                                 HostShape{s->topology.hosts, s->topology.ranks_per_host});

  // Cross-rank consistency (invariant 2): same rules, same table, same backends, everywhere. init()
  // compared the inputs before any backend came up; this covers what a communicator adds: the
  // backends its members actually hold.
  ConfigDigest mine;
  std::string names;
  for (Backend* b : raw)
    names += fmt::format("{}{}", names.empty() ? "" : ",", b->name());
  mine.fields.emplace_back("hash of the selection rules and tuning table",
                           fmt::format("{:016x}", s->selector->config_hash()));
  mine.fields.emplace_back("backends", names);
  mine.fields.emplace_back("MCR_VERIFY", std::string(to_string(rt.verify)));
  const std::string text = mine.fields[0].second + "|" + names + "|" + mine.fields[2].second;
  // Agreed, as a group's own exchange is: O(n) store requests, and all members go on or none.
  auto all = group_all_gather_agreed(
      *rt.bootstrap, s->world_ranks, fmt::format("mcr/hash/{}", id), to_bytes(text),
      rt.bootstrap->timeout(), "communicator_creation",
      fmt::format("communicator {} ({} ranks): the check of its members' configuration", id, size));
  std::vector<ConfigDigest> digests;
  for (const auto& a : all) {
    const std::string t = from_bytes(a);
    const auto bar = t.find('|');
    const auto bar2 = bar == std::string::npos ? bar : t.find('|', bar + 1);
    ConfigDigest d;
    d.fields.emplace_back(mine.fields[0].first, t.substr(0, bar));
    d.fields.emplace_back(mine.fields[1].first, bar == std::string::npos
                                                    ? std::string()
                                                    : t.substr(bar + 1, bar2 - bar - 1));
    d.fields.emplace_back(mine.fields[2].first,
                          bar2 == std::string::npos ? std::string() : t.substr(bar2 + 1));
    digests.push_back(std::move(d));
  }
  if (const std::string differ = describe_differences(digests); !differ.empty()) {
    throw MismatchError(fmt::format(
        "communicator {} (ranks of the communicator): {}; every rank must load the same "
        "MCR_RULES, MCR_RULES_FILE, MCR_TUNING, MCR_BACKENDS and MCR_VERIFY",
        id, differ));
  }
  // A communicator of one rank has nobody to disagree with; one that runs steps of composed
  // operations is covered by the verification of the operation they compose.
  if (rt.verify != VerifyMode::off && size > 1 && !creating_parts) {
    s->verifier = std::make_unique<Verifier>(*s, rt.verify);
  }
  finish_backends_creation(*s);
  return s;
}

}  // namespace mcr::detail

namespace mcr {

using namespace detail;

namespace {

// InitOptions::store and the rank and size it implies; checked before anything blocks.
void check_store_options(const InitOptions& o) {
  if (!o.store) {
    if (o.rank != -1 || o.size != 0) {
      throw InvalidArgument(fmt::format(
          "InitOptions::rank = {}, InitOptions::size = {} given without InitOptions::store: rank "
          "and size come from the launcher unless a store is given",
          o.rank, o.size));
    }
    return;
  }
  if (o.size < 1) {
    throw InvalidArgument(
        fmt::format("InitOptions::size = {}: a given store needs the world size, >= 1", o.size));
  }
  if (o.rank < 0 || o.rank >= o.size) {
    throw InvalidArgument(fmt::format(
        "InitOptions::rank = {} is outside [0, {}) (InitOptions::size = {}): a given store needs "
        "this process's rank",
        o.rank, o.size, o.size));
  }
}

// With a given store, its rank and size replace the launcher's. Only an MPI launcher's world is
// worth joining, and only when it is the same world (checked here, before anything blocks);
// without an MPI launcher, MPI_Init would form a world of one beside the real one.
void take_rank_from_options(detail::LaunchInfo& launch, const InitOptions& options) {
  if (!options.store) return;
  if (launch.mpi_world && (launch.rank != options.rank || launch.size != options.size)) {
    throw InvalidArgument(fmt::format(
        "InitOptions::rank = {}, InitOptions::size = {} disagree with the MPI launcher ({}: rank "
        "{} of {}); the given store must serve the world MPI forms",
        options.rank, options.size, to_string(launch.launcher), launch.rank, launch.size));
  }
  launch.rank = options.rank;
  launch.size = options.size;
}

// Brings up the rendezvous: the given store, or mcr's own TCP store on rank 0.
void form_world(Runtime& rt, const InitOptions& options, std::chrono::milliseconds timeout) {
  if (!options.store) {
    start_store(rt, launcher_world_exchange(rt.launch), timeout);
    return;
  }
  std::unique_ptr<Exchange> mpi =
      rt.launch.mpi_world ? launcher_world_exchange(rt.launch) : nullptr;
  use_given_store(rt, options.store, std::move(mpi), timeout);
}

}  // namespace

Communicator init(const InitOptions& options) {
  // A second call returns the world; after a failed one it raises (the world was never formed).
  if (runtime_exists()) return Communicator(initialized_runtime().world);
  check_store_options(options);
  auto rt = std::make_unique<Runtime>();
  static_cast<mcr::LaunchInfo&>(rt->launch) = mcr::launch_info(options.store != nullptr);
  take_rank_from_options(rt->launch, options);

  // Every input is read and checked before anything blocks. A rank whose input is rejected still
  // joins the bootstrap and the configuration exchange below, so that its peers raise at once too
  // instead of waiting for it inside a backend's bring-up.
  for (const auto& f : composed_backends())
    rt->composed.push_back(ComposedChoice{.factory = &f, .config = {}, .wanted = true});
  InitInputs in;
  std::exception_ptr rejected;
  std::string rejected_what;
  bool retain_memory = false;
  EnvLogModes log_modes;
  try {
    retain_memory = malloc_retain_requested();
    in = read_init_inputs(options);
    // The backends' own inputs too (MCR_GLOO_*), of those selected: read only inside a backend's
    // bring-up, a value bad on one rank raised there alone while its peers waited in it.
    for (const auto& f : compiled_backends()) {
      const bool selected = in.backends.empty() || std::find(in.backends.begin(), in.backends.end(),
                                                             f.name) != in.backends.end();
      if (selected && f.check_config != nullptr) f.check_config();
    }
    log_modes = requested_env_comm_log();
    check_env_comm_log_files(log_modes);
    check_flight_env();  // read at the first communicator, after the backends are up
    rt->verify = verify_mode_requested(options);
    for (ComposedChoice& c : rt->composed)
      c.config = c.factory->read_config();
  } catch (const Error& e) {
    rejected = std::current_exception();
    rejected_what = e.what();
    in = InitInputs{};
    // A valid timeout still bounds this rank's bootstrap, the exchange that tells its peers, and
    // its finalize() (the 600 s default stood in for MCR_TIMEOUT=5 when another input was bad).
    try {
      in.timeout = resolve_timeout(options);
    } catch (const Error&) {  // NOLINT(bugprone-empty-catch): the default stands
    }
  }
  const auto timeout = in.timeout;
  rt->rules = in.rules;
  rt->rules_source = in.rules_source;
  rt->table = in.table;
  rt->table_source = in.table_source;
  // Before any backend exists, so that their first buffers already come from the retained heap.
  const std::string memory_policy = retain_memory ? retain_freed_memory() : std::string();
  // Before any socket exists: a peer's death must become an error, not a silent SIGPIPE.
  ignore_default_sigpipe();

  form_world(*rt, options, timeout);
  runtime_slot() = std::move(rt);
  Runtime& r = runtime();

  // Which backends this rank would bring up, decided locally; then every rank compares its inputs
  // and that list with all others before any backend exists (a backend set that differs between
  // ranks would hang in its bring-up).
  const auto& factories = compiled_backends();
  std::vector<std::string> order = in.backends;
  if (order.empty()) {
    for (const auto& f : factories)
      order.emplace_back(f.name);
  }
  std::vector<const BackendFactory*> bring_up;
  std::vector<std::string> bring_up_names;
  for (const auto& name : order) {
    for (const auto& f : factories) {
      if (f.name != name || rejected) continue;  // a rejected configuration brings nothing up
      std::string why = f.unusable_reason(*r.bootstrap);
      if (!why.empty()) {
        r.unusable.emplace_back(name, why);
        log_debug("backend {} unusable: {}", name, why);
        continue;
      }
      bring_up.push_back(&f);
      bring_up_names.emplace_back(name);
    }
  }
  for (const auto& f : factories) {
    if (std::find(order.begin(), order.end(), f.name) == order.end()) {
      r.unusable.emplace_back(f.name, "not selected by MCR_BACKENDS / InitOptions::backends");
    }
  }
  ConfigDigest digest = make_config_digest(in, bring_up_names);
  for (ComposedChoice& c : r.composed) {
    c.wanted = in.backends.empty() || std::find(in.backends.begin(), in.backends.end(),
                                                c.factory->name) != in.backends.end();
    if (!c.wanted) {
      r.unusable.emplace_back(c.factory->name,
                              "not selected by MCR_BACKENDS / InitOptions::backends");
    }
    digest.fields.emplace_back(c.factory->config_source, c.config);
  }
  // finalize() gathers the log over the world where it is on: a rank without it would leave the
  // others waiting there. The modes themselves only decide what rank 0 writes.
  const std::string log_key = "communication log (MCR_LOG)";
  digest.fields.emplace_back(log_key, log_modes.any() ? "on" : "off");
  digest.shown[log_key] = log_modes.text.empty() ? "(unset)" : log_modes.text;
  digest.error = rejected_what;
  check_config_agrees(r.bootstrap->exchange(), r.launch.rank, digest);
  if (rejected) std::rethrow_exception(rejected);
  if (!memory_policy.empty()) log_debug("{}", memory_policy);
  if (r.rules) log_skipped_rules(*r.rules, r.unusable);

  std::vector<std::unique_ptr<Backend>> backends;
  for (const BackendFactory* f : bring_up)
    backends.push_back(device::with_staging_if_device(f->create_world(*r.bootstrap)));
  if (backends.empty()) throw Error("no communication backend is usable in this process");
  std::vector<int> world(static_cast<std::size_t>(r.launch.size));
  for (int i = 0; i < r.launch.size; ++i)
    world[static_cast<std::size_t>(i)] = i;
  r.world = make_comm_state(r.launch.rank, r.launch.size, 0, std::move(world), std::move(backends),
                            timeout);
  Watchdog::instance().start();
  Communicator world_comm(r.world);
  attach_env_comm_log(world_comm, log_modes);
  return world_comm;
}

bool is_initialized() noexcept {
  return runtime_exists() && runtime_slot()->world != nullptr;
}

bool any_thread_may_call() noexcept {
  return detail::launchers_accept_any_thread();
}

namespace detail {
namespace {

// finalize() is collective, like MPI_Finalize. No rank tears down its backends while a peer may
// still be in an operation with it (a peer whose operation then times out must see a timeout, not
// a closed connection), and rank 0, whose process holds the store, does not close it while another
// rank is still in init (Gloo's rendezvous) or reading a new_group's keys. So every rank checks in
// and waits for all, bounded by the timeout.
//
// The check-in is a barrier on the world's first backend that reports a lost peer at once
// (Backend::reports_peer_loss: Gloo): a rank that died (or left) closed its connections, so the
// survivors learn it at once instead of waiting out the timeout for a check-in that never comes. It
// runs on the backend directly, even on a world aborted by a timeout, because whether a rank
// aborted is its own view: every rank must choose the same way to check in. Otherwise it goes
// through the store; a rank that never arrives has failed, and its launcher ends the job.
void barrier_check_in(CommState& world, Backend& backend) {
  OpArgs a;
  a.op = OpType::barrier;
  a.op_name = to_string(OpType::barrier);
  a.sequence = world.next_sequence++;
  a.timeout = world.timeout;
  a.async = true;  // never blocks: polled below with every backend progressed
  std::unique_ptr<PendingOp> pending = backend.start(a);
  const auto deadline = Clock::now() + a.timeout;
  while (pending && !pending->test()) {
    if (Clock::now() > deadline) {
      pending->abandon();
      throw TimeoutError(fmt::format("barrier (sequence #{}) on backend '{}' did not complete "
                                     "within {} ms",
                                     a.sequence, backend.name(), a.timeout.count()),
                         "barrier", a.sequence, std::string(backend.name()));
    }
    engine().progress_all();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void wait_for_all_ranks(Runtime& r) noexcept {
  if (!r.bootstrap || r.launch.size <= 1) return;
  if (r.world) {
    for (const auto& b : r.world->backends) {
      if (!b->reports_peer_loss()) continue;
      try {
        barrier_check_in(*r.world, *b);
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
    // Rank 0's process holds the server: it stays until every other rank has let go of it.
    if (r.store_server && !r.store_server->wait_for_ranks_to_leave(0, r.bootstrap->timeout())) {
      log_debug("finalize: some ranks were still connected to the store after {} ms",
                r.bootstrap->timeout().count());
    }
    // A given store may live in rank 0's process too (torch's TCPStore when launched by hand),
    // and mcr cannot see its connections: every rank says when it is done with the store, and
    // rank 0 waits for all of them before it returns (and may exit).
    if (r.store_given) {
      if (store.add("mcr/finalize/done", 1) == r.launch.size) {
        store.set("mcr/finalize/done/all", {1});
      }
      if (r.launch.rank == 0) (void)store.get("mcr/finalize/done/all", r.bootstrap->timeout());
    }
  } catch (const std::exception& e) {  // finalize must not throw: say why and leave
    log_debug("finalize: not every rank checked in: {}", e.what());
  }
}

}  // namespace
}  // namespace detail

namespace {

// MPI_Finalize (or any launching library's shutdown) waits for every peer: bounded by the
// watchdog, which ends the job when it blocks beyond `limit`, so finalize() never waits past the
// timeout for a peer that does not come.
// (The process's watchdog is stopped by then: its other duties read the runtime being torn down.)
void shut_down_launchers_within(std::chrono::milliseconds limit) {
  detail::Watchdog::Options o;
  o.process_duties = false;
  o.grace = std::chrono::nanoseconds(0);
  detail::Watchdog dog(std::move(o));
  dog.start();
  dog.arm("finalize (MPI_Finalize)", 0, "mpi", limit, nullptr);
  detail::shutdown_launchers();
  dog.disarm();
}

// The runtime's timeout: the world's, or the bootstrap's where init() failed before the world was
// formed (a bring-up that raised on this rank: 600 s stood in for MCR_TIMEOUT).
std::chrono::milliseconds runtime_timeout(const detail::Runtime& rt) {
  if (rt.world) return rt.world->timeout;
  if (rt.bootstrap) return rt.bootstrap->timeout();
  return detail::kDefaultTimeout;
}

// finalize() after a failure (failure.hpp): say once how this process ends, abandon every
// communicator, and take the runtime down without waiting for any peer's check-in. A launching
// library is finalized only when that is still safe (no operation of it was abandoned), within the
// timeout; otherwise it is left initialised: an abandoned MPI request cannot be cancelled, and
// MPI_Finalize would progress it into freed buffers.
// Returns whether the launching library was shut down (or there was none).
bool finalize_after_failure(std::unique_ptr<detail::Runtime>& slot, const std::string& reason) {
  // First: abandoning may abandon MPI requests still in flight (an operation whose handle the
  // caller dropped, a composed operation's steps), which decides whether MPI may be finalized.
  detail::abandon_all_communicators(reason);
  const bool launcher = slot->launch.mpi_world;
  const bool own_error = detail::exiting_on_error();
  const bool shut_down =
      !launcher || (!own_error && detail::launchers_may_shut_down_after_failure());
  const auto limit = runtime_timeout(*slot);
  detail::log_line(fmt::format(
      "finalize after a failure ({}): operations in flight are abandoned and no peer's check-in "
      "is waited for{}",
      reason,
      !launcher ? ""
      : shut_down
          ? fmt::format("; MPI is finalized within {} ms (else the job is aborted)", limit.count())
          : fmt::format("; {}, so MPI is not finalized: the launcher (mpirun, srun) ends the "
                        "whole job when this process exits (with mpirun's default settings its "
                        "exit status is this process's, or 1 when that is 0)",
                        own_error ? "this process exits on an error of its own"
                                  : "an MPI operation was abandoned")));
  detail::Watchdog::instance().stop();
  detail::write_local_env_comm_log(fmt::format("finalize after a failure: {}", reason));
  slot->world.reset();  // kept by the abandoned list, never destroyed
  // The store goes with the runtime: a peer waiting on it (rank 0's process holds it) fails at
  // once, told that the store's owner is going away; no grace for peers to leave first.
  if (slot->store_server) slot->store_server->set_goodbye_grace(std::chrono::milliseconds(50));
  slot.reset();
  if (shut_down) shut_down_launchers_within(limit);
  return shut_down;
}

}  // namespace

void exiting_on_error(std::string_view reason) noexcept {
  if (!detail::runtime_slot()) return;
  detail::note_exiting_on_error();
  detail::note_failure(reason);
}

void finalize() {
  auto& slot = detail::runtime_slot();
  if (!slot) return;
  std::string failure = detail::failure_reason();
  std::exception_ptr unfinished;
  const auto limit = runtime_timeout(*slot);
  if (failure.empty()) {
    // Operations still in flight on any communicator (handles not waited yet, or dropped) finish
    // first: a peer may still need this rank's part of them, and their buffers are the caller's.
    // The wait is bounded by the world's timeout; what fails or does not finish in it is raised
    // once the runtime is torn down, so that finalize() never returns over a silent failure.
    unfinished = detail::engine().drain_all(detail::Clock::now() + limit);
    failure = detail::failure_reason();  // an operation the drain waited for may have failed
  }
  if (failure.empty() && slot->world) {
    Communicator world(slot->world);
    finish_env_comm_log(world);
    // The log's gather is a collective on the world: a peer that failed, or arrives past the
    // timeout, fails it, and its abandoned request must not be under MPI_Finalize.
    failure = detail::failure_reason();
  }
  if (!failure.empty()) {
    // Forgotten once its runtime is down, unless a launching library was left up over an abandoned
    // request: a runtime over the same library must not finalize it either.
    if (finalize_after_failure(slot, failure)) detail::clear_failure();
    if (unfinished) std::rethrow_exception(unfinished);
    return;
  }
  Watchdog::instance().stop();
  detail::wait_for_all_ranks(*slot);
  slot->world.reset();
  slot.reset();
  shut_down_launchers_within(limit);
  if (unfinished) std::rethrow_exception(unfinished);
}

}  // namespace mcr
