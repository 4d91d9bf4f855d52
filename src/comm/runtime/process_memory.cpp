// Freed memory stays in the process.
//
// Libraries allocate a collective's temporary buffers on every call: Open MPI's
// MPI_Reduce_scatter_block takes a buffer of the whole input, and the composed backend its
// scratch. With glibc's defaults a large buffer is mapped on malloc and unmapped on free (or,
// from the heap, trimmed back to the kernel), so every call pays a page fault per 4 KiB page of
// it again. On this project's test machine that made a 16 MiB reduce_scatter over MPI on two
// ranks take 80 ms instead of 5
// (docs/performance/bench-and-tuning.md#page-faults-temporary-buffers). Keeping freed memory
// mapped (no mmap for large blocks, no trimming) is what HPC runtimes with registration caches
// do; the price is that the process's resident size stays at its high-water mark.
#include "runtime/process_memory.hpp"

#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "mcr/comm/memory.hpp"
#include "mcr/errors.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace mcr::detail {

bool malloc_retain_requested() {
  const char* v = std::getenv("MCR_MALLOC_RETAIN");
  if (v == nullptr || *v == '\0' || std::string_view(v) == "1") return true;
  if (std::string_view(v) == "0") return false;
  throw InvalidArgument(fmt::format(
      "MCR_MALLOC_RETAIN='{}' must be 1 (keep freed memory for reuse, the default) or 0 (leave the "
      "C library's defaults)",
      v));
}

std::string retain_freed_memory() {
#if defined(__GLIBC__)
  // Large blocks come from the heap instead of their own mappings, and the heap's top is never
  // trimmed: both hand pages back that the next operation would fault in again. Threads started
  // from now on share the main heap: glibc gives other threads heaps of at most 64 MiB, and a
  // larger block there is mapped afresh on every allocation whatever the two settings say.
  const bool no_mmap = mallopt(M_MMAP_MAX, 0) == 1;
  const bool no_trim = mallopt(M_TRIM_THRESHOLD, -1) == 1;
  const bool one_arena = mallopt(M_ARENA_MAX, 1) == 1;
  if (no_mmap && no_trim && one_arena)
    return "freed memory is kept for reuse (M_MMAP_MAX 0, M_TRIM_THRESHOLD -1, M_ARENA_MAX 1)";
  return fmt::format(
      "glibc refused part of the memory policy (M_MMAP_MAX: {}, M_TRIM_THRESHOLD: {}, "
      "M_ARENA_MAX: {})",
      no_mmap ? "set" : "refused", no_trim ? "set" : "refused", one_arena ? "set" : "refused");
#else
  return "freed memory follows the C library's defaults: only glibc's allocator can be told to "
         "keep it";
#endif
}

}  // namespace mcr::detail

namespace mcr {

void apply_memory_policy() {
  if (detail::malloc_retain_requested()) detail::retain_freed_memory();
}

}  // namespace mcr
