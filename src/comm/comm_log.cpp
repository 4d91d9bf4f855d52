// CommLog: recording on the hot path, and gathering every rank's records to rank 0.
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>

#include "mcr/bench.hpp"
#include "mcr/comm_log.hpp"

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
  std::uint8_t backend;  ///< index into bench::known_backend_names(), kOtherBackend if not there
};
constexpr std::uint8_t kOtherBackend = 255;

std::int64_t steady_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::uint8_t backend_index(std::string_view name) {
  const auto& names = bench::known_backend_names();
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<std::uint8_t>(i);
  }
  return kOtherBackend;
}

std::string_view backend_name(std::uint8_t index) {
  const auto& names = bench::known_backend_names();
  return index < names.size() ? std::string_view(names[index]) : std::string_view("other");
}

}  // namespace

double LogRecord::algbw_gbps() const noexcept {
  return bench::algbw_gbps(bytes, seconds());
}
double LogRecord::busbw_gbps() const noexcept {
  return bench::busbw_gbps(op, bytes, seconds(), group_size);
}

CommLog::CommLog(std::size_t max_records) : max_records_(max_records) {
  const auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  wall_minus_steady_ns_ = wall - steady_ns(std::chrono::steady_clock::now());
  blocks_.reserve(max_records / kBlockRecords + 1);  // the hot path never reallocates this either
  add_block();
}

CommLog::~CommLog() {
  for (LogRecord* b : blocks_)
    munmap(b, kBlockBytes);
}

bool CommLog::add_block() noexcept {
  // MAP_POPULATE maps the whole block in one call: about 5x cheaper than taking a page fault per
  // 4 KiB on first touch, which otherwise dominated the cost of recording.
  void* p = mmap(nullptr, kBlockBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) return false;
  try {
    blocks_.push_back(static_cast<LogRecord*>(p));
  } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory; the record is counted as dropped
    munmap(p, kBlockBytes);
    return false;
  }
  return true;
}

void CommLog::on_complete(const OpRecord& r) noexcept {
  if (size_ >= max_records_ || (size_ == blocks_.size() * kBlockRecords && !add_block())) {
    ++dropped_;
    return;
  }
  LogRecord* slot = blocks_[size_ / kBlockRecords] + size_ % kBlockRecords;
  new (slot) LogRecord{steady_ns(r.start),
                       steady_ns(r.end),
                       r.sequence,
                       r.group_id,
                       r.bytes,
                       r.count,
                       r.backend,
                       r.op,
                       r.dtype,
                       r.async,
                       r.group_rank,
                       r.group_size,
                       r.global_rank};
  ++size_;
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
  // Snapshot first: the gather below is itself observed when this log is still attached.
  std::vector<WireRecord> mine(size_);
  for (std::size_t i = 0; i < size_; ++i) {
    const auto& r = (*this)[i];
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
  std::vector<std::int64_t> mine_counts{static_cast<std::int64_t>(mine.size()),
                                        static_cast<std::int64_t>(dropped_)};
  std::vector<std::int64_t> counts(2 * un);
  comm.all_gather(mine_counts, counts);
  std::size_t most = 0;
  for (std::size_t q = 0; q < un; ++q)
    most = std::max(most, static_cast<std::size_t>(counts[2 * q]));

  // gather() needs equal counts: pad every rank's block to the longest.
  const std::size_t block = most * sizeof(WireRecord);
  std::vector<std::uint8_t> send(block);
  if (!mine.empty()) std::memcpy(send.data(), mine.data(), mine.size() * sizeof(WireRecord));
  const bool root = comm.rank() == 0;
  std::vector<std::uint8_t> recv(root ? block * un : 0);
  if (block > 0) {
    comm.gather(Tensor(send.data(), send.size(), DType::u8),
                Tensor(recv.empty() ? nullptr : recv.data(), recv.size(), DType::u8), 0);
  }
  GatheredLog out;
  if (!root) return out;
  out.ranks = n;
  for (std::size_t q = 0; q < un; ++q) {
    out.dropped.push_back(static_cast<std::uint64_t>(counts[2 * q + 1]));
    const auto have = static_cast<std::size_t>(counts[2 * q]);
    for (std::size_t i = 0; i < have; ++i) {
      WireRecord w;
      std::memcpy(&w, recv.data() + q * block + i * sizeof(WireRecord), sizeof(WireRecord));
      out.records.push_back(LogRecord{w.start_ns, w.end_ns, w.sequence, w.group_id, w.bytes,
                                      w.count, backend_name(w.backend), static_cast<OpType>(w.op),
                                      static_cast<DType>(w.dtype), w.async != 0, w.group_rank,
                                      w.group_size, w.global_rank});
    }
  }
  return out;
}

}  // namespace mcr
