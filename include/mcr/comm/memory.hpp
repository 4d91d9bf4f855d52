// The process's memory policy (docs/design.md, "Memory").
#pragma once

namespace mcr {

/// Applies MCR_MALLOC_RETAIN now: unless it is 0, glibc keeps freed memory in the process and
/// threads started from now on share the main heap, so that the temporary buffers of collectives
/// are not faulted in again on every call. init() applies it too. A thread started earlier keeps
/// its own glibc heap, where a block of 64 MiB or more is mapped afresh on every allocation; a
/// program whose threads that call mcr (or allocate its buffers) start before init() calls this
/// first. Repeating it changes nothing. Throws InvalidArgument naming the variable for a value
/// other than 0 or 1.
void apply_memory_policy();

}  // namespace mcr
