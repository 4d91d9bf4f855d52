// What the core asks of the libraries that can form a job's world (through their factories'
// LaunchSupport): a world exchange at init, shutdown at finalize, and a way to end the whole job.
#pragma once

#include <memory>

namespace mcr::detail {

class Exchange;
struct LaunchInfo;

/// The world exchange of the first compiled library whose launcher formed this job's world, or
/// nullptr (then ranks meet through the TCP store alone).
std::unique_ptr<Exchange> launcher_world_exchange(const LaunchInfo& launch);
/// Finalizes every library that launcher_world_exchange() initialised.
void shutdown_launchers() noexcept;
/// Whether every such library may still be finalized after a failure of this process
/// (LaunchSupport::may_shut_down_after_failure).
bool launchers_may_shut_down_after_failure() noexcept;
/// Ends the whole job after an unrecoverable error: through the launching library when it is up
/// (so every rank goes down), else by ending this process.
[[noreturn]] void abort_job(int code) noexcept;
/// Whether every initialised launching library accepts calls from any one thread at a time.
bool launchers_accept_any_thread() noexcept;

}  // namespace mcr::detail
