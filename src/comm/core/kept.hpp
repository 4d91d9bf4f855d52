// Memory that a library may still use after the runtime gave up an operation (a timeout, a
// failure): an MPI request cannot be recalled, and a peer that arrives later completes it into
// its buffers, whenever that is. Such memory is kept until the process exits, never freed
// (docs/reliability.md, "Lifetimes").
#pragma once

#include <memory>

namespace mcr::detail {

/// Keeps `what` alive until the process exits. Never throws.
void keep_until_exit(std::shared_ptr<const void> what) noexcept;

}  // namespace mcr::detail
