// The communication log's hooks into init()/finalize(): MCR_LOG=summary|trace attaches a log to the
// world communicator (inherited by sub-communicators); finalize() writes it (collective).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "mcr/comm/communicator.hpp"

namespace mcr::detail {

/// What MCR_LOG asks for.
struct EnvLogModes {
  bool summary = false;
  bool trace = false;
  std::string text;  ///< MCR_LOG as set ("" when unset)
  bool any() const noexcept { return summary || trace; }
};

/// Reads and checks MCR_LOG (summary, trace, summary,trace; off/0/none/empty for none). Throws
/// InvalidArgument naming the variable, its value and the modes. init() calls it with its other
/// inputs, before anything blocks, and compares any() across ranks: finalize() gathers the log
/// over the world where it is on, so a rank without it would leave the others waiting.
EnvLogModes requested_env_comm_log();
/// Checks, at init(), that the files `modes` writes at finalize() can be written there
/// (MCR_LOG_FILE where the summary goes to a file, MCR_TRACE_FILE or its default where a trace is
/// asked for): an existing directory of them, writable; the path not a directory. Throws
/// InvalidArgument naming the variable, its value and what is wrong.
void check_env_comm_log_files(const EnvLogModes& modes);
/// Called by init() on the world communicator; attaches a log when `modes` asks for one.
void attach_env_comm_log(Communicator& world, const EnvLogModes& modes);
/// The observer a communicator gets when `next` is set where `current` was: `next`, except where
/// `current` is MCR_LOG's log (alone, or beside an earlier observer of the user's): then the log
/// and `next` together, so that a program's own observer does not silence MCR_LOG. nullptr
/// detaches every observer, the log's included.
std::shared_ptr<OpObserver> beside_env_comm_log(const std::shared_ptr<OpObserver>& current,
                                                std::shared_ptr<OpObserver> next);
/// Called by finalize() before teardown, on every rank: writes the summary / trace if one is
/// attached. When the collective gather cannot run (the world was aborted by a timeout), each rank
/// writes its own records instead, as write_local_env_comm_log() does.
void finish_env_comm_log(Communicator& world);
/// Abnormal exit (timeout, fatal signal, std::terminate, exit without finalize): writes this rank's
/// own records, without communicating, to MCR_LOG_FILE / MCR_TRACE_FILE with ".rank<N>" inserted
/// before the extension (the summary goes to standard error when MCR_LOG_FILE is unset). Once per
/// process; nothing when no log is attached. Never throws.
void write_local_env_comm_log(std::string_view reason) noexcept;

/// Records per rank that CommLog::collect() gathers in one round over `ranks` ranks: as many as
/// keep a round's receive buffer on rank 0 within 2 GiB (and its count far below MPI's int
/// limit), at most 2^20. set_log_gather_round_records(n) fixes it at n (tests: several rounds
/// from a short log); 0 restores the default.
std::size_t log_gather_round_records(std::size_t ranks) noexcept;
void set_log_gather_round_records(std::size_t n) noexcept;

}  // namespace mcr::detail
