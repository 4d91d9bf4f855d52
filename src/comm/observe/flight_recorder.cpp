// The flight recorder's ring, the registry of live rings, and the JSON dump (format in
// docs/reliability.md).
#include "observe/flight_recorder.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mcr/comm/flight_recorder.hpp"
#include "mcr/errors.hpp"
#include "observe/flight_registry.hpp"
#include "runtime/runtime.hpp"

namespace mcr::detail {
namespace {

constexpr std::size_t kDefaultEntries = 256;
constexpr std::size_t kMaxEntries = std::size_t{1} << 20;

std::size_t entries_from_env() {
  const char* v = std::getenv("MCR_FLIGHT_ENTRIES");
  if (v == nullptr || *v == '\0') return kDefaultEntries;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || n < 1 || static_cast<unsigned long long>(n) > kMaxEntries) {
    throw InvalidArgument(
        fmt::format("MCR_FLIGHT_ENTRIES='{}' must be a whole number of operations from 1 to {}", v,
                    kMaxEntries));
  }
  return std::bit_ceil(static_cast<std::size_t>(n));  // a power of two: slots by masking
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

bool shows_root(OpType op) {
  return op == OpType::broadcast || op == OpType::reduce || op == OpType::gather ||
         op == OpType::scatter || op == OpType::send || op == OpType::recv;
}

nlohmann::json entry_json(const FlightEntry& e, std::int64_t now_ns,
                          std::int64_t wall_minus_steady) {
  const FlightState state = e.state.load(std::memory_order_relaxed);
  nlohmann::json j{{"seq", e.sequence},
                   {"op", std::string(to_string(e.op))},
                   {"dtype", std::string(to_string(e.dtype))},
                   {"count", e.count},
                   {"bytes", e.bytes},
                   {"backend", std::string(e.backend)},
                   {"form", e.async ? "async" : "sync"},
                   {"state", std::string(to_string(state))}};
  if (shows_root(e.op)) j["root"] = e.root;
  const bool ended = e.ended_ns != 0;
  j["issued_unix_ns"] = e.issued_ns + wall_minus_steady;
  if (ended) j["ended_unix_ns"] = e.ended_ns + wall_minus_steady;
  // Stamps come from the coarse clock (50 ms steps): durations are whole steps.
  j[ended ? "duration_ms" : "pending_for_ms"] =
      ((ended ? e.ended_ns : now_ns) - e.issued_ns) / 1'000'000;
  return j;
}

}  // namespace

void advance_flight_clock() noexcept {
  g_flight_clock_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now().time_since_epoch())
                              .count(),
                          std::memory_order_relaxed);
}

std::string_view to_string(FlightState s) noexcept {
  switch (s) {
    case FlightState::issued:
      return "issued";
    case FlightState::started:
      return "started";
    case FlightState::completed:
      return "completed";
    case FlightState::failed:
      return "failed";
    case FlightState::timed_out:
      return "timed_out";
  }
  return "unknown";
}

FlightRegistry& flight_registry() {
  // Never destroyed: communicators destroyed during exit still unregister, and crash hooks running
  // during exit still read it.
  static FlightRegistry& r = *new FlightRegistry;
  return r;
}

namespace {

std::string dir_from_env() {
  const char* dir = std::getenv("MCR_FLIGHT_DIR");
  return dir != nullptr ? std::string(dir) : std::string();
}

void create_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw InvalidArgument(
        fmt::format("MCR_FLIGHT_DIR='{}' cannot be created: {}", dir, ec.message()));
  }
}

// A directory kept from job to job (the usual job script) holds the last job's records: `mcr
// doctor` merged a stale record of this rank with the others (standing in for a rank killed
// before it wrote, or a group of another size). This process's own are removed once, when its
// records are first placed, in a job of several ranks: a process alone (`mcr info`, `mcr doctor`'s
// neighbours in a job script, a dump before init()) would remove rank 0's record of the failed
// job it is run to look at. A rank that never gets this far leaves its old one, which the doctor
// tells apart by its pid and time only.
void remove_own_records(const std::string& dir, int world_rank) {
  const std::string record = fmt::format("flight-rank{}.json", world_rank);
  const std::string later = fmt::format("flight-rank{}.later-", world_rank);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name == record || (name.starts_with(later) && name.ends_with(".json"))) {
      std::filesystem::remove(e.path(), ec);
    }
  }
}

}  // namespace

void check_flight_env() {
  (void)entries_from_env();
  const std::string dir = dir_from_env();
  if (!dir.empty()) create_dir(dir);
}

namespace {
// The configuration of a process placed as world rank `rank` of `size` (rank < 0: no runtime yet,
// alone as rank 0 of 1, none of its records removed).
FlightConfig read_flight_config(int rank, int size) {
  FlightConfig f;
  f.entries = entries_from_env();
  f.dir = dir_from_env();
  f.host = host_name();
  f.pid = static_cast<long>(::getpid());
  if (rank >= 0) {
    f.world_rank = rank;
    f.world_size = size;
  }
  if (!f.dir.empty()) {
    create_dir(f.dir);
    if (f.world_size > 1) remove_own_records(f.dir, f.world_rank);
    f.path = fmt::format("{}/flight-rank{}.json", f.dir, f.world_rank);
  }
  advance_flight_clock();
  return f;
}
}  // namespace

const FlightConfig& flight_config() {
  // Placed once the runtime exists, and from then on for the rest of the process (a crash report
  // after finalize() still names this rank). Asked before (mcr::dump_flight_record() before
  // init()), the answer is a process alone's, not kept: kept, every rank of the job wrote its
  // records to flight-rank0.json.
  static std::atomic<const FlightConfig*> placed{nullptr};
  if (const FlightConfig* c = placed.load(std::memory_order_acquire)) return *c;
  if (!runtime_exists()) {
    static const FlightConfig& alone = *new FlightConfig(read_flight_config(-1, 1));
    return alone;
  }
  // Never destroyed: an exit handler may still dump after static destruction began.
  static const FlightConfig& in_job =
      *new FlightConfig(read_flight_config(runtime().launch.rank, runtime().launch.size));
  placed.store(&in_job, std::memory_order_release);
  return in_job;
}

FlightRecorder::FlightRecorder() : mask_(flight_config().entries - 1) {
  ring_ = std::make_unique<FlightEntry[]>(capacity());
}

FlightRecorder::~FlightRecorder() {
  auto& reg = flight_registry();
  std::lock_guard lock(reg.mu);
  std::erase(reg.live, this);
}

void FlightRecorder::attach(std::uint64_t group_id, int group_rank, int group_size,
                            const std::vector<int>& world_ranks) {
  // Live (seen by dumps and the watchdog) only once it is identified, and identified under the
  // registry's lock, which its readers hold: registered before, a dump taken meanwhile (a signal
  // inside split()) showed a group 0 of one rank that `mcr doctor` merged into the world's.
  auto& reg = flight_registry();
  std::lock_guard lock(reg.mu);
  group_id_ = group_id;
  group_rank_ = group_rank;
  group_size_ = group_size;
  world_ranks_ = world_ranks;
  if (std::find(reg.live.begin(), reg.live.end(), this) == reg.live.end()) reg.live.push_back(this);
}

int FlightRecorder::world_rank_of(int group_rank) const noexcept {
  if (group_rank < 0 || static_cast<std::size_t>(group_rank) >= world_ranks_.size()) return -1;
  return world_ranks_[static_cast<std::size_t>(group_rank)];
}

std::uint64_t FlightRecorder::collective_of(std::uint64_t sequence) const noexcept {
  const FlightEntry* e = find(sequence);
  if (e == nullptr || is_point_to_point(e->op)) {
    return FlightEntry::kNotCollective;
  }
  // The send/recv before it: all of them, less those from it on (all in the ring, as it is).
  const std::uint64_t issued = issued_count();
  std::uint64_t p2p_since = 0;
  for (std::uint64_t s = sequence + 1; s < issued; ++s) {
    const FlightEntry* later = find(s);
    if (later != nullptr && is_point_to_point(later->op)) ++p2p_since;
  }
  const std::uint64_t p2p_before = p2p_.load(std::memory_order_relaxed) - p2p_since;
  return sequence >= p2p_before ? sequence - p2p_before : FlightEntry::kNotCollective;
}

nlohmann::json FlightRecorder::to_json(std::int64_t now_ns, std::int64_t wall_minus_steady) const {
  const std::uint64_t issued = issued_count();
  const std::uint64_t p2p_total = p2p_.load(std::memory_order_relaxed);
  nlohmann::json ops = nlohmann::json::array();
  const std::uint64_t first = issued > capacity() ? issued - capacity() : 0;
  // Collective indices in one pass: the send/recv before the ring's first entry are all of them
  // less those the ring holds.
  std::uint64_t p2p_in_ring = 0;
  for (std::uint64_t s = first; s < issued; ++s) {
    const FlightEntry* e = find(s);
    if (e != nullptr && is_point_to_point(e->op)) ++p2p_in_ring;
  }
  std::uint64_t p2p_before = p2p_total >= p2p_in_ring ? p2p_total - p2p_in_ring : 0;
  for (std::uint64_t s = first; s < issued; ++s) {
    const FlightEntry* e = find(s);
    if (e == nullptr) continue;
    ops.push_back(entry_json(*e, now_ns, wall_minus_steady));
    if (is_point_to_point(e->op)) {
      ++p2p_before;
    } else if (s >= p2p_before) {
      ops.back()["collective"] = s - p2p_before;
    }
  }
  return {{"group_id", group_id_},
          {"group_rank", group_rank_},
          {"group_size", group_size_},
          {"world_ranks", world_ranks_},
          {"issued", issued},
          {"in_flight", in_flight()},
          {"collectives", issued >= p2p_total ? issued - p2p_total : 0},
          {"capacity", capacity()},
          {"ops", std::move(ops)}};
}

std::string flight_record_json(std::string_view reason, bool snapshot, std::size_t* communicators) {
  const FlightConfig& c = flight_config();
  const std::int64_t steady_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count();
  const std::int64_t wall_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count();
  const std::int64_t wall_minus_steady = wall_ns - steady_ns;
  nlohmann::json comms = nlohmann::json::array();
  {
    // A signal handler cannot wait for the lock indefinitely (its own thread may hold it): after
    // 10 ms it reads unlocked. The lock is only held for communicator creation and destruction
    // and the watchdog's progress scan.
    auto& reg = flight_registry();
    std::unique_lock lock(reg.mu, std::defer_lock);
    for (int i = 0; i < 100 && !lock.try_lock(); ++i)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    for (const FlightRecorder* r : reg.live)
      comms.push_back(r->to_json(steady_ns, wall_minus_steady));
  }
  if (communicators != nullptr) *communicators = comms.size();
  nlohmann::json j{{"format", "mcr-flight-record"},
                   {"version", 1},
                   {"reason", std::string(reason)},
                   {"snapshot", snapshot},
                   {"world_rank", c.world_rank},
                   {"world_size", c.world_size},
                   {"host", c.host},
                   {"pid", c.pid},
                   {"time_unix_ns", wall_ns},
                   {"communicators", std::move(comms)}};
  return j.dump(1);
}

bool write_whole_file(const std::string& path, const std::string& text) noexcept {
  // open/write/close: usable from a signal handler, unlike iostreams. The temporary file is this
  // write's own: two dumps at once (two communicators timing out together, a signal during a
  // dump) must not truncate and interleave into one file.
  static std::atomic<unsigned> writes{0};
  std::string tmp;
  try {
    tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), writes.fetch_add(1));
  } catch (...) {
    return false;
  }
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  // Rename last, so that a reader never sees a half-written dump.
  if (::close(fd) == 0 && std::rename(tmp.c_str(), path.c_str()) == 0) return true;
  ::unlink(tmp.c_str());
  return false;
}

// What this process has put in its record file (flight-rank<N>.json). The first record that
// holds a communicator is the one that explains a failure (a timeout, a signal, the watchdog);
// later dumps of the same process, such as an empty one written by a SIGTERM after finalize(),
// must not replace it. A snapshot of a live job (SIGUSR1, on demand) is replaced by the next
// dump: left in place, it was what `mcr doctor` read after a later hang, and blamed the rank whose
// snapshot was old. One dump at a time writes the record file (kWriting); a dump that comes
// meanwhile goes beside it, numbered. Atomics only: dumps run in signal handlers.
namespace {
enum : int {
  kNothingWritten = 0,
  kWroteEmpty = 1,
  kWroteRecord = 2,
  kWriting = 3,
  kWroteSnapshot = 4
};
std::atomic<int> g_record_state{kNothingWritten};
std::atomic<int> g_later_dumps{0};

// Takes the record file for this dump when nothing that explains a failure is in it yet and no
// other dump is writing it; returns the state to put back if the write fails, or -1 when the
// dump goes beside it.
int claim_record_file() noexcept {
  int state = g_record_state.load();
  while (state == kNothingWritten || state == kWroteEmpty || state == kWroteSnapshot) {
    if (g_record_state.compare_exchange_weak(state, kWriting)) return state;
  }
  return -1;
}
}  // namespace

std::string dump_flight_record_to_dir(std::string_view reason, DumpKind kind) noexcept {
  try {
    const FlightConfig& c = flight_config();
    if (c.path.empty()) return {};
    std::size_t communicators = 0;
    const std::string text = flight_record_json(reason, kind == DumpKind::snapshot, &communicators);
    // The record file keeps the first dump with a communicator in it; every later dump of this
    // process goes beside it, numbered, so that none is lost and `mcr doctor` reads the first.
    const int before = claim_record_file();
    std::string path = c.path;
    if (before < 0) {
      const int k = g_later_dumps.fetch_add(1) + 1;
      path = fmt::format("{}/flight-rank{}.later-{}.json", c.dir, c.world_rank, k);
    }
    const bool written = write_whole_file(path, text);
    if (before >= 0) {
      const int now = communicators == 0           ? kWroteEmpty
                      : kind == DumpKind::snapshot ? kWroteSnapshot
                                                   : kWroteRecord;
      g_record_state.store(written ? now : before);
    }
    if (!written) {
      std::fprintf(stderr, "mcr[%d]: flight record not written to %s\n", c.world_rank,
                   path.c_str());
      return {};
    }
    return path;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mcr: flight record not written: %s\n", e.what());
    return {};
  }
}

}  // namespace mcr::detail

namespace mcr {

std::string dump_flight_record(const std::string& path) {
  using namespace detail;
  if (path.empty()) {
    if (flight_config().path.empty()) {
      throw InvalidArgument(
          "dump_flight_record: no path given and MCR_FLIGHT_DIR is not set; pass a file name or "
          "set MCR_FLIGHT_DIR");
    }
    // As the record file's other writers: a failure's record in it stays, a snapshot goes beside.
    std::string written = dump_flight_record_to_dir("on demand", DumpKind::snapshot);
    if (written.empty()) {
      throw Error(fmt::format("dump_flight_record: '{}' cannot be written", flight_config().path));
    }
    return written;
  }
  if (!write_whole_file(path, flight_record_json("on demand", true))) {
    throw Error(fmt::format("dump_flight_record: '{}' cannot be written", path));
  }
  return path;
}

}  // namespace mcr
