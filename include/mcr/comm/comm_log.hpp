// Communication log: records every completed operation (an OpObserver), then gathers the records of
// every rank to rank 0 for a summary (per op x size x backend, with a straggler view) and a Chrome
// trace-event file. Recording adds no synchronisation: one 40-byte append per op to memory mapped
// ahead of need (docs/bench.md, "Cost and synchronisation").
// MCR_LOG=summary|trace (or both, comma separated) attaches one to the world communicator at
// init().
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mcr/comm/communicator.hpp"
#include "mcr/comm/observer.hpp"
#include "mcr/comm/types.hpp"

namespace mcr {

/// One completed operation as kept by the log (times in nanoseconds of the steady clock).
struct LogRecord {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint64_t sequence = 0;
  std::uint64_t group_id = 0;
  std::size_t bytes = 0;  ///< the op's nccl-tests byte count (docs/tuning-format.md)
  std::size_t count = 0;
  std::string_view backend;
  OpType op = OpType::barrier;
  DType dtype = DType::f32;
  bool async = false;
  int group_rank = 0;
  int group_size = 1;
  int global_rank = 0;

  double seconds() const noexcept { return static_cast<double>(end_ns - start_ns) * 1e-9; }
  /// bytes / seconds in GB/s (nccl-tests algbw).
  double algbw_gbps() const noexcept;
  /// algbw times the op's bus factor for group_size ranks (nccl-tests busbw).
  double busbw_gbps() const noexcept;
};

/// Every rank's records, as gathered on rank 0 by CommLog::collect().
struct GatheredLog {
  int ranks = 0;
  std::vector<LogRecord> records;      ///< all ranks; start/end on a common wall-clock time base
  std::vector<std::uint64_t> dropped;  ///< per rank: records not kept (beyond max_records)
  /// Per global rank: the index of its host among the collecting communicator's hosts (numbered
  /// in the order of their lowest member), -1 where not gathered; empty when unknown (a rank's
  /// own log written alone). Lets a reader tell which groups span hosts.
  std::vector<int> hosts;
};

/// Per (op, bytes, backend): the DeepSpeed-style summary row. Latency of a collective instance is
/// the slowest member's (the slowest rank defines collective latency); p2p records count singly.
struct SummaryRow {
  OpType op = OpType::barrier;
  std::size_t bytes = 0;
  std::string backend;
  int group_size = 1;
  std::size_t count = 0;
  double total_us = 0, avg_us = 0, p50_us = 0, max_us = 0;
  double algbw_gbps = 0, busbw_gbps = 0;  ///< from avg_us
};
/// Per rank: time in communication and its straggler share (own latency minus the group's minimum
/// latency for the same collective instance, summed).
struct StragglerRow {
  int rank = 0;
  std::size_t ops = 0;
  double comm_us = 0;
  double straggler_us = 0;
};
struct LogSummary {
  std::vector<SummaryRow> rows;
  std::vector<StragglerRow> stragglers;
};

class CommLog final : public OpObserver {
 public:
  static constexpr std::size_t kDefaultMaxRecords = std::size_t{1} << 24;
  /// Keeps at most `max_records` records (later ones are counted as dropped).
  explicit CommLog(std::size_t max_records = kDefaultMaxRecords);

  ~CommLog() override;
  CommLog(const CommLog&) = delete;
  CommLog& operator=(const CommLog&) = delete;

  void on_complete(const OpRecord& record) noexcept override;

  /// Records kept so far, in completion order.
  std::size_t size() const noexcept { return size_; }
  LogRecord operator[](std::size_t i) const noexcept;
  /// A copy of every record kept so far.
  std::vector<LogRecord> records() const;
  std::uint64_t dropped() const noexcept { return dropped_; }
  void clear() noexcept;

  /// Collective over `comm`: gathers every rank's records (taken before the gather's own
  /// operations) to rank 0, with clocks aligned through each rank's wall clock. Other ranks get an
  /// empty result.
  GatheredLog collect(Communicator& comm) const;

 private:
  // Records live in fixed 4 MiB blocks that never move, so appending never copies earlier records.
  // A kept record is 40 bytes: what is the same for every operation of a communicator on one
  // backend (group, ranks, backend, sync or async) is stored once, as a "channel".
  //
  // Fresh memory is what recording costs most: mapping and zeroing a block, with the hypervisor
  // backing each new page, came to 11-13 ns per record on the guest of
  // docs/performance/bench-and-tuning.md#log-overhead, where writing the record itself takes about
  // 1 ns. So a provisioner thread keeps the next block
  // mapped and populated ahead of need; the hot path only maps one itself when the provisioner is
  // behind. (Huge-page advice was tried: with on-demand compaction it made the cost bimodal.)
  struct Packed;
  struct Channel {
    std::uint64_t group_id = 0;
    std::string_view backend;
    int group_rank = 0;
    int group_size = 1;
    int global_rank = 0;
    bool async = false;
  };
  struct Provisioner;
  bool add_block() noexcept;
  std::uint16_t channel_of(const OpRecord& r, bool& ok) noexcept;

  std::vector<Packed*> blocks_;
  std::unique_ptr<Provisioner> provisioner_;
  std::vector<Channel> channels_;
  std::size_t last_channel_ = 0;
  std::size_t size_ = 0;
  std::size_t max_records_;
  std::uint64_t dropped_ = 0;
  std::int64_t wall_minus_steady_ns_ = 0;  ///< this rank's wall clock minus its steady clock
};

/// The summary rows (sorted by op, bytes, backend) and the straggler view of a gathered log.
LogSummary summarize(const GatheredLog& log);
/// Human-readable summary: the table, then the straggler view.
std::string format_summary(const LogSummary& summary, const GatheredLog& log);
/// Chrome trace-event JSON (opens in Perfetto / chrome://tracing): one "X" event per record with
/// pid = global rank and tid = backend, names for both, and op details in "args".
void write_chrome_trace(const GatheredLog& log, std::ostream& out);

/// What MCR_LOG has finalize() write (MCR_LOG as init() reads it), and where (MCR_LOG_FILE and
/// MCR_TRACE_FILE as they are now: finalize() reads them again when it writes).
struct CommLogOutputs {
  bool summary = false;      ///< MCR_LOG holds "summary"
  bool trace = false;        ///< MCR_LOG holds "trace"
  std::string summary_file;  ///< MCR_LOG_FILE; empty: the summary goes to standard error
  std::string trace_file;    ///< MCR_TRACE_FILE, default mcr_trace.json
};
/// Where this process's MCR_LOG output goes: rank 0 writes these files after a healthy finalize();
/// after an abnormal end each rank writes its own, ".rank<N>" inserted before the extension.
/// Throws InvalidArgument for an MCR_LOG that init() refuses.
CommLogOutputs env_comm_log_outputs();

}  // namespace mcr
