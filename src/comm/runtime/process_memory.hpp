// Whether memory the process frees is kept for reuse or handed back to the kernel
// (MCR_MALLOC_RETAIN).
#pragma once

#include <string>

namespace mcr::detail {

/// Reads MCR_MALLOC_RETAIN: unset, empty or "1" keep freed memory, "0" leaves the C library's
/// defaults; anything else throws InvalidArgument naming the variable, the value and the rule.
bool malloc_retain_requested();

/// Makes the C library keep freed memory in the process instead of unmapping or trimming it, and
/// puts threads started from now on on the main heap (other threads' heaps cannot keep blocks of
/// 64 MiB or more), so a buffer freed after one collective is reused, already mapped, by the next.
/// Returns what it did, for MCR_DEBUG; where the C library offers no such control it does nothing
/// and says so.
std::string retain_freed_memory();

}  // namespace mcr::detail
