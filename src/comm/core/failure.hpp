// What this process knows about communication failures, and how finalize() ends after one.
//
// A failure (an operation timed out, a peer was lost, a library call failed during an operation)
// leaves peers that may never arrive and library state that may never settle: an abandoned MPI
// request cannot be cancelled, and MPI_Finalize waits for every peer. So once a process has seen
// one, finalize() waits for nobody (docs/reliability.md, "Finalize after a failure").
#pragma once

#include <string>
#include <string_view>

namespace mcr::detail {

/// Records a communication failure of this process; the first reason is kept. Thread-safe.
void note_failure(std::string_view reason) noexcept;
/// The first failure's reason; empty when this process has seen none.
std::string failure_reason();
/// Forgets the failure once finalize() has taken down the runtime it happened in and shut its
/// launching library down (or had none): a runtime that init() brings up afterwards starts without
/// it (its finalize() went down the failure path, abandoning healthy communicators under its
/// peers' operations). Where MPI was left up over an abandoned request, the failure stays, so that
/// a later runtime over the same MPI does not finalize it either.
void clear_failure() noexcept;
/// Whether the failure is this process's own exit on an error (mcr::exiting_on_error): then the
/// launcher, not MPI_Finalize, ends the job.
void note_exiting_on_error() noexcept;
bool exiting_on_error() noexcept;

/// finalize() after a failure: every live communicator is aborted (later calls fail fast), its
/// operations in flight are abandoned without waiting, and each backend is told to abort
/// (Gloo closes its connections, so peers blocked on them fail at once; NCCL aborts its
/// communicators). The communicators are then kept, never destroyed: tearing one down could wait
/// on, or touch, what an abandoned operation still holds. Never blocks on a peer.
void abandon_all_communicators(std::string_view reason) noexcept;

}  // namespace mcr::detail
