// CommLog: recording on the hot path, and gathering every rank's records to rank 0.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>

#include "core/state.hpp"
#include "mcr/comm/bandwidth.hpp"
#include "mcr/comm/comm_log.hpp"
#include "mcr/comm/info.hpp"
#include "observe/comm_log_hooks.hpp"

namespace mcr {
namespace {

// The fixed-size form of a record that travels between ranks (same binary on every rank).
struct WireRecord {
  std::int64_t start_ns;
  std::int64_t end_ns;
  std::uint64_t sequence;
  std::uint64_t group_id;
  std::uint64_t bytes;
  std::uint64_t count;
  std::int32_t group_rank;
  std::int32_t group_size;
  std::int32_t global_rank;
  std::uint8_t op;
  std::uint8_t dtype;
  std::uint8_t async;
  std::uint8_t backend;  ///< index into backend_names(), kOtherBackend if not there
};
constexpr std::uint8_t kOtherBackend = 255;

std::int64_t steady_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::uint8_t backend_index(std::string_view name) {
  const auto& names = backend_names();
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<std::uint8_t>(i);
  }
  return kOtherBackend;
}

std::string_view backend_name(std::uint8_t index) {
  const auto& names = backend_names();
  return index < names.size() ? std::string_view(names[index]) : std::string_view("other");
}

constexpr std::size_t kBlockBytes = std::size_t{4} << 20;
constexpr int kLowBits = 16;  // op and dtype, or the channel, below a 48-bit count
constexpr std::uint64_t kMax48 = (std::uint64_t{1} << 48) - 1;

}  // namespace

namespace detail {
namespace {
std::atomic<std::size_t> g_round_records{0};  // 0: the default
}  // namespace

std::size_t log_gather_round_records(std::size_t ranks) noexcept {
  if (const std::size_t fixed = g_round_records.load(std::memory_order_relaxed); fixed > 0) {
    return fixed;
  }
  constexpr std::size_t kRoundBytes = std::size_t{1} << 31;  // rank 0's receive buffer per round
  constexpr std::size_t kMost = std::size_t{1} << 20;
  return std::clamp<std::size_t>(
      kRoundBytes / (sizeof(WireRecord) * std::max<std::size_t>(ranks, 1)), 1, kMost);
}

void set_log_gather_round_records(std::size_t n) noexcept {
  g_round_records.store(n, std::memory_order_relaxed);
}
}  // namespace detail

// bytes and count saturate at 2^48 - 1 (256 TiB), far beyond any single message.
struct CommLog::Packed {
  std::int64_t start_ns;
  std::int64_t end_ns;
  std::uint64_t sequence;
  std::uint64_t bytes_op_dtype;  ///< bytes << 16 | op << 8 | dtype
  std::uint64_t count_channel;   ///< count << 16 | index into channels_
};

namespace {
constexpr std::size_t kPackedBytes = 40;  // checked against sizeof(Packed) in the constructor
constexpr std::size_t kBlockRecords = kBlockBytes / kPackedBytes;
}  // namespace

double LogRecord::algbw_gbps() const noexcept {
  return mcr::algbw_gbps(bytes, seconds());
}
double LogRecord::busbw_gbps() const noexcept {
  return mcr::busbw_gbps(op, bytes, seconds(), group_size);
}

CommLog::CommLog(std::size_t max_records) : max_records_(max_records) {
  static_assert(sizeof(Packed) == kPackedBytes);
  const auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  wall_minus_steady_ns_ = wall - steady_ns(std::chrono::steady_clock::now());
  blocks_.reserve(max_records / kBlockRecords + 1);  // the hot path never reallocates this either
  channels_.reserve(64);
  try {
    provisioner_ = std::make_unique<Provisioner>();
  } catch (
      ...) {  // NOLINT(bugprone-empty-catch): no thread; blocks are then mapped on the hot path
  }
  add_block();
}

namespace {

void* map_block() noexcept {
  // MAP_POPULATE maps the whole block in one call: about 5x cheaper than taking a page fault per
  // 4 KiB on first touch.
  void* p = mmap(nullptr, kBlockBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

// Keeps one spare block mapped. take() hands it over without blocking (nullptr when there is none
// yet) and asks for the next; the thread sleeps on a condition variable in between, so it costs
// nothing while the log is not growing.
struct CommLog::Provisioner {
  std::mutex mutex;
  std::condition_variable wanted;
  std::atomic<void*> spare{nullptr};
  bool want = true;
  bool stop = false;
  std::thread thread;

  Provisioner() {
    thread = std::thread([this] {
      std::unique_lock lock(mutex);
      while (true) {
        wanted.wait(lock, [this] { return want || stop; });
        if (stop) return;
        want = false;
        if (spare.load() != nullptr) continue;  // asked again before the last one was taken
        lock.unlock();
        void* p = map_block();
        lock.lock();
        if (p == nullptr) continue;  // out of memory: the hot path will try (and count drops)
        void* old = spare.exchange(p);
        if (old != nullptr) munmap(old, kBlockBytes);
      }
    });
  }
  ~Provisioner() {
    {
      std::lock_guard lock(mutex);
      stop = true;
    }
    wanted.notify_one();
    thread.join();
    if (void* p = spare.exchange(nullptr)) munmap(p, kBlockBytes);
  }
  void* take() noexcept {
    void* p = spare.exchange(nullptr);
    {
      std::lock_guard lock(mutex);
      want = true;
    }
    wanted.notify_one();
    return p;
  }
};

CommLog::~CommLog() {
  provisioner_.reset();
  for (Packed* b : blocks_)
    munmap(b, kBlockBytes);
}

bool CommLog::add_block() noexcept {
  void* p = provisioner_ ? provisioner_->take() : nullptr;
  if (p == nullptr) p = map_block();  // the provisioner is behind (or could not start)
  if (p == nullptr) return false;
  try {
    blocks_.push_back(static_cast<Packed*>(p));
  } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory; the record is counted as dropped
    munmap(p, kBlockBytes);
    return false;
  }
  return true;
}

std::uint16_t CommLog::channel_of(const OpRecord& r, bool& ok) noexcept {
  auto same = [&](const Channel& c) {
    return c.group_id == r.group_id && c.async == r.async && c.backend.data() == r.backend.data() &&
           c.group_rank == r.group_rank && c.group_size == r.group_size &&
           c.global_rank == r.global_rank;
  };
  ok = true;
  if (last_channel_ < channels_.size() && same(channels_[last_channel_]))
    return static_cast<std::uint16_t>(last_channel_);
  for (std::size_t i = 0; i < channels_.size(); ++i) {
    if (same(channels_[i])) {
      last_channel_ = i;
      return static_cast<std::uint16_t>(i);
    }
  }
  if (channels_.size() > 0xffff) {
    ok = false;
    return 0;
  }
  try {
    channels_.push_back(
        Channel{r.group_id, r.backend, r.group_rank, r.group_size, r.global_rank, r.async});
  } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory; the record is counted as dropped
    ok = false;
    return 0;
  }
  last_channel_ = channels_.size() - 1;
  return static_cast<std::uint16_t>(last_channel_);
}

void CommLog::on_complete(const OpRecord& r) noexcept {
  bool ok = true;
  const std::uint16_t channel = channel_of(r, ok);
  if (!ok || size_ >= max_records_ || (size_ == blocks_.size() * kBlockRecords && !add_block())) {
    ++dropped_;
    return;
  }
  Packed* slot = blocks_[size_ / kBlockRecords] + size_ % kBlockRecords;
  const std::uint64_t bytes = std::min<std::uint64_t>(r.bytes, kMax48);
  const std::uint64_t count = std::min<std::uint64_t>(r.count, kMax48);
  new (slot) Packed{steady_ns(r.start), steady_ns(r.end), r.sequence,
                    bytes << kLowBits | std::uint64_t{static_cast<std::uint8_t>(r.op)} << 8 |
                        static_cast<std::uint8_t>(r.dtype),
                    count << kLowBits | channel};
  ++size_;
}

LogRecord CommLog::operator[](std::size_t i) const noexcept {
  const Packed& p = blocks_[i / kBlockRecords][i % kBlockRecords];
  const Channel& c = channels_[p.count_channel & 0xffff];
  return LogRecord{p.start_ns,
                   p.end_ns,
                   p.sequence,
                   c.group_id,
                   static_cast<std::size_t>(p.bytes_op_dtype >> kLowBits),
                   static_cast<std::size_t>(p.count_channel >> kLowBits),
                   c.backend,
                   static_cast<OpType>((p.bytes_op_dtype >> 8) & 0xff),
                   static_cast<DType>(p.bytes_op_dtype & 0xff),
                   c.async,
                   c.group_rank,
                   c.group_size,
                   c.global_rank};
}

std::vector<LogRecord> CommLog::records() const {
  std::vector<LogRecord> out;
  out.reserve(size_);
  for (std::size_t i = 0; i < size_; ++i)
    out.push_back((*this)[i]);
  return out;
}

void CommLog::clear() noexcept {
  size_ = 0;
  dropped_ = 0;
}

GatheredLog CommLog::collect(Communicator& comm) const {
  // The all_gather and gathers below are the runtime's, not the program's: no observer of `comm`
  // records them (this log, MCR_LOG's beside it, the program's own).
  struct Unobserved {
    detail::CommState& state;
    bool before;
    explicit Unobserved(detail::CommState& s) : state(s), before(s.unobserved) {
      s.unobserved = true;
    }
    ~Unobserved() { state.unobserved = before; }
    Unobserved(const Unobserved&) = delete;
    Unobserved& operator=(const Unobserved&) = delete;
  } unobserved(detail::state_of(comm));
  // This rank's records, in the form that travels.
  std::vector<WireRecord> mine(size_);
  for (std::size_t i = 0; i < size_; ++i) {
    const LogRecord r = (*this)[i];
    mine[i] = WireRecord{r.start_ns + wall_minus_steady_ns_,
                         r.end_ns + wall_minus_steady_ns_,
                         r.sequence,
                         r.group_id,
                         r.bytes,
                         r.count,
                         r.group_rank,
                         r.group_size,
                         r.global_rank,
                         static_cast<std::uint8_t>(r.op),
                         static_cast<std::uint8_t>(r.dtype),
                         static_cast<std::uint8_t>(r.async ? 1 : 0),
                         backend_index(r.backend)};
  }
  const int n = comm.size();
  const auto un = static_cast<std::size_t>(n);
  // Per rank: records kept, records dropped, global rank, host index.
  constexpr std::size_t kFields = 4;
  std::vector<std::int64_t> mine_counts{static_cast<std::int64_t>(mine.size()),
                                        static_cast<std::int64_t>(dropped_),
                                        comm.global_rank(comm.rank()), comm.host_index()};
  std::vector<std::int64_t> counts(kFields * un);
  comm.all_gather(mine_counts, counts);
  std::size_t most = 0;
  for (std::size_t q = 0; q < un; ++q)
    most = std::max(most, static_cast<std::size_t>(counts[kFields * q]));

  // In rounds of at most `per_round` records per rank, each gather()'s blocks padded to the
  // longest (it needs equal counts), in 8-byte words: one gather of every record overran MPI's
  // int counts on long runs (n x records x 64 bytes past 2^31) and needed a receive buffer of the
  // whole log at once.
  constexpr std::size_t kWords = sizeof(WireRecord) / sizeof(std::int64_t);
  static_assert(sizeof(WireRecord) % sizeof(std::int64_t) == 0, "records travel as i64 words");
  const std::size_t per_round = detail::log_gather_round_records(un);
  const bool root = comm.rank() == 0;
  // Rank 0 places each rank's records at that rank's offset as they arrive: rank by rank, in one
  // allocation (the log may be large).
  GatheredLog out;
  std::vector<std::size_t> offset(un + 1, 0);
  for (std::size_t q = 0; q < un; ++q)
    offset[q + 1] = offset[q] + static_cast<std::size_t>(counts[kFields * q]);
  if (root) out.records.resize(offset[un]);
  std::vector<std::int64_t> send;
  std::vector<std::int64_t> recv;
  for (std::size_t first = 0; first < most; first += per_round) {
    const std::size_t k = std::min(per_round, most - first);
    send.assign(k * kWords, 0);
    const std::size_t have = first < mine.size() ? std::min(k, mine.size() - first) : 0;
    if (have > 0) std::memcpy(send.data(), mine.data() + first, have * sizeof(WireRecord));
    recv.resize(root ? k * kWords * un : 0);
    comm.gather(Tensor(send.data(), send.size(), DType::i64),
                Tensor(recv.empty() ? nullptr : recv.data(), recv.size(), DType::i64), 0);
    if (!root) continue;
    for (std::size_t q = 0; q < un; ++q) {
      const auto total = static_cast<std::size_t>(counts[kFields * q]);
      const std::size_t there = first < total ? std::min(k, total - first) : 0;
      for (std::size_t i = 0; i < there; ++i) {
        WireRecord w;
        std::memcpy(&w, recv.data() + (q * k + i) * kWords, sizeof(WireRecord));
        out.records[offset[q] + first + i] = LogRecord{w.start_ns,
                                                       w.end_ns,
                                                       w.sequence,
                                                       w.group_id,
                                                       w.bytes,
                                                       w.count,
                                                       backend_name(w.backend),
                                                       static_cast<OpType>(w.op),
                                                       static_cast<DType>(w.dtype),
                                                       w.async != 0,
                                                       w.group_rank,
                                                       w.group_size,
                                                       w.global_rank};
      }
    }
  }
  if (!root) return out;
  out.ranks = n;
  for (std::size_t q = 0; q < un; ++q) {
    const auto global = static_cast<std::size_t>(counts[kFields * q + 2]);
    if (out.hosts.size() <= global) out.hosts.resize(global + 1, -1);
    out.hosts[global] = static_cast<int>(counts[kFields * q + 3]);
  }
  for (std::size_t q = 0; q < un; ++q) {
    out.dropped.push_back(static_cast<std::uint64_t>(counts[kFields * q + 1]));
  }
  return out;
}

}  // namespace mcr
