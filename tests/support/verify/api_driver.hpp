// Issues a prepared case through the public Communicator API: the way the multi-rank conformance
// suite, the randomized mixing test and the multi-rank device tests run an operation.
#pragma once

#include <chrono>
#include <vector>

#include "mcr/comm.hpp"
#include "prepared_case.hpp"

namespace mcr::test {

/// Issues `c` on `comm` with its buffers at `where`, forcing the case's backend (empty: the
/// runtime selects). A synchronous case has completed when this returns (no handles); an
/// asynchronous one returns its handles (two for a send/recv exchange: the receive first).
std::vector<Work> issue(Communicator& comm, const PreparedCase& c, const Placement& where,
                        std::chrono::milliseconds timeout = {});

}  // namespace mcr::test
