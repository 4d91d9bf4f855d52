// The communication log's hooks into init()/finalize(): MCR_LOG=summary|trace attaches a log to the
// world communicator (inherited by sub-communicators); finalize() writes it (collective).
#pragma once

#include <string_view>

#include "mcr/comm/communicator.hpp"

namespace mcr::detail {

/// Called by init() on the world communicator; attaches a log when MCR_LOG asks for one.
void attach_env_comm_log(Communicator& world);
/// Called by finalize() before teardown, on every rank: writes the summary / trace if one is
/// attached. When the collective gather cannot run (the world was aborted by a timeout), each rank
/// writes its own records instead, as write_local_env_comm_log() does.
void finish_env_comm_log(Communicator& world);
/// Abnormal exit (timeout, fatal signal, std::terminate, exit without finalize): writes this rank's
/// own records, without communicating, to MCR_LOG_FILE / MCR_TRACE_FILE with ".rank<N>" inserted
/// before the extension (the summary goes to standard error when MCR_LOG_FILE is unset). Once per
/// process; nothing when no log is attached. Never throws.
void write_local_env_comm_log(std::string_view reason) noexcept;

}  // namespace mcr::detail
