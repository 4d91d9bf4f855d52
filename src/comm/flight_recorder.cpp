// The flight recorder's ring, the registry of live rings, and the JSON dump (format in
// docs/reliability.md).
#include "flight_recorder.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backend.hpp"
#include "flight_registry.hpp"
#include "mcr/errors.hpp"
#include "mcr/flight_recorder.hpp"
#include "runtime.hpp"
#include "tick_clock.hpp"

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
  return static_cast<std::size_t>(n);
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::int64_t unix_ns(std::chrono::steady_clock::time_point t, std::int64_t wall_minus_steady) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count() +
         wall_minus_steady;
}

nlohmann::json entry_json(const FlightEntry& e, std::uint64_t now_tick,
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
  if (e.root >= 0) j["root"] = e.root;
  const bool ended = e.ended_tick != 0;
  const auto span = TickClock::to_steady(e.issued_tick, ended ? e.ended_tick : now_tick);
  j["issued_unix_ns"] = unix_ns(span.start, wall_minus_steady);
  if (ended) j["ended_unix_ns"] = unix_ns(span.end, wall_minus_steady);
  j[ended ? "duration_us" : "pending_for_us"] =
      std::chrono::duration<double, std::micro>(span.end - span.start).count();
  return j;
}

}  // namespace

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

const FlightConfig& flight_config() {
  static const FlightConfig& c = *new FlightConfig([] {
    FlightConfig f;
    f.entries = entries_from_env();
    const char* dir = std::getenv("MCR_FLIGHT_DIR");
    if (dir != nullptr && *dir != '\0') f.dir = dir;
    f.host = host_name();
    f.pid = static_cast<long>(::getpid());
    if (runtime_exists()) {
      f.world_rank = runtime().launch.rank;
      f.world_size = runtime().launch.size;
    }
    if (!f.dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(f.dir, ec);
      if (ec) {
        throw InvalidArgument(
            fmt::format("MCR_FLIGHT_DIR='{}' cannot be created: {}", f.dir, ec.message()));
      }
      f.path = fmt::format("{}/flight-rank{}.json", f.dir, f.world_rank);
    }
    TickClock::prepare();  // dumps map counter readings to times
    return f;
  }());
  return c;
}

FlightRecorder::FlightRecorder() : capacity_(flight_config().entries) {
  ring_ = std::make_unique<FlightEntry[]>(capacity_);
  auto& reg = flight_registry();
  std::lock_guard lock(reg.mu);
  reg.live.push_back(this);
}

FlightRecorder::~FlightRecorder() {
  auto& reg = flight_registry();
  std::lock_guard lock(reg.mu);
  std::erase(reg.live, this);
}

void FlightRecorder::attach(std::uint64_t group_id, int group_rank, int group_size,
                            const std::vector<int>& world_ranks) {
  group_id_ = group_id;
  group_rank_ = group_rank;
  group_size_ = group_size;
  world_ranks_ = world_ranks;
}

int FlightRecorder::world_rank_of(int group_rank) const noexcept {
  if (group_rank < 0 || static_cast<std::size_t>(group_rank) >= world_ranks_.size()) return -1;
  return world_ranks_[static_cast<std::size_t>(group_rank)];
}

void FlightRecorder::issued(const OpArgs& args, std::string_view backend,
                            std::size_t bytes) noexcept {
  FlightEntry& e = ring_[args.sequence % capacity_];
  e.sequence = args.sequence;
  e.issued_tick = TickClock::now();
  e.ended_tick = 0;
  e.count = args.count;
  e.bytes = bytes;
  e.backend = backend;
  const bool rooted = args.op == OpType::broadcast || args.op == OpType::reduce ||
                      args.op == OpType::gather || args.op == OpType::scatter ||
                      args.op == OpType::send || args.op == OpType::recv;
  e.root = rooted ? args.root : -1;
  e.op = args.op;
  e.dtype = args.dtype;
  e.async = args.async;
  e.state.store(FlightState::issued, std::memory_order_relaxed);
  // One writer: a load and a store, no read-modify-write.
  issued_.store(args.sequence + 1, std::memory_order_relaxed);
  in_flight_.store(in_flight_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void FlightRecorder::set(std::uint64_t sequence, FlightState s, bool terminal) noexcept {
  if (terminal) {
    in_flight_.store(in_flight_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  }
  FlightEntry& e = ring_[sequence % capacity_];
  if (e.sequence != sequence) return;  // overwritten: more than capacity() operations since
  if (terminal) e.ended_tick = TickClock::now();
  e.state.store(s, std::memory_order_relaxed);
}

const FlightEntry* FlightRecorder::find(std::uint64_t sequence) const noexcept {
  const FlightEntry& e = ring_[sequence % capacity_];
  return e.sequence == sequence ? &e : nullptr;
}

nlohmann::json FlightRecorder::to_json(std::uint64_t now_tick,
                                       std::int64_t wall_minus_steady) const {
  const std::uint64_t issued = issued_count();
  nlohmann::json ops = nlohmann::json::array();
  const std::uint64_t first = issued > capacity_ ? issued - capacity_ : 0;
  for (std::uint64_t s = first; s < issued; ++s) {
    if (const FlightEntry* e = find(s)) ops.push_back(entry_json(*e, now_tick, wall_minus_steady));
  }
  return {{"group_id", group_id_},       {"group_rank", group_rank_}, {"group_size", group_size_},
          {"world_ranks", world_ranks_}, {"issued", issued},          {"in_flight", in_flight()},
          {"capacity", capacity_},       {"ops", std::move(ops)}};
}

std::string flight_record_json(std::string_view reason) {
  const FlightConfig& c = flight_config();
  const auto steady = std::chrono::steady_clock::now();
  const auto wall = std::chrono::system_clock::now();
  const std::int64_t wall_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(wall.time_since_epoch()).count();
  const std::int64_t wall_minus_steady =
      wall_ns -
      std::chrono::duration_cast<std::chrono::nanoseconds>(steady.time_since_epoch()).count();
  const std::uint64_t now_tick = TickClock::now();
  nlohmann::json comms = nlohmann::json::array();
  {
    // A signal handler cannot wait for the lock (its own thread may hold it): it reads unlocked.
    auto& reg = flight_registry();
    std::unique_lock lock(reg.mu, std::try_to_lock);
    for (const FlightRecorder* r : reg.live)
      comms.push_back(r->to_json(now_tick, wall_minus_steady));
  }
  nlohmann::json j{{"format", "mcr-flight-record"},
                   {"version", 1},
                   {"reason", std::string(reason)},
                   {"world_rank", c.world_rank},
                   {"world_size", c.world_size},
                   {"host", c.host},
                   {"pid", c.pid},
                   {"time_unix_ns", wall_ns},
                   {"communicators", std::move(comms)}};
  return j.dump(1);
}

bool write_whole_file(const std::string& path, const std::string& text) noexcept {
  // open/write/close: usable from a signal handler, unlike iostreams.
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) {
      ::close(fd);
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  // Rename last, so that a reader never sees a half-written dump.
  return ::close(fd) == 0 && std::rename(tmp.c_str(), path.c_str()) == 0;
}

std::string dump_flight_record_to_dir(std::string_view reason) noexcept {
  try {
    const FlightConfig& c = flight_config();
    if (c.path.empty()) return {};
    if (!write_whole_file(c.path, flight_record_json(reason))) {
      std::fprintf(stderr, "mcr[%d]: flight record not written to %s\n", c.world_rank,
                   c.path.c_str());
      return {};
    }
    return c.path;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mcr: flight record not written: %s\n", e.what());
    return {};
  }
}

}  // namespace mcr::detail

namespace mcr {

std::string dump_flight_record(const std::string& path) {
  using namespace detail;
  const std::string target = path.empty() ? flight_config().path : path;
  if (target.empty()) {
    throw InvalidArgument(
        "dump_flight_record: no path given and MCR_FLIGHT_DIR is not set; pass a file name or set "
        "MCR_FLIGHT_DIR");
  }
  if (!write_whole_file(target, flight_record_json("on demand"))) {
    throw Error(fmt::format("dump_flight_record: '{}' cannot be written", target));
  }
  return target;
}

}  // namespace mcr
