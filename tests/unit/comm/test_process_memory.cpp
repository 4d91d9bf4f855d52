// MCR_MALLOC_RETAIN: the variable's values, and what the policy changes: a large block freed and
// allocated again comes back without page faults once freed memory is retained, and with a fault
// per page under glibc's defaults (the reference, measured in the same way).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "mcr/errors.hpp"
#include "runtime/process_memory.hpp"

namespace {

constexpr std::size_t kBytes = std::size_t{64} << 20;  // above glibc's largest mmap threshold
constexpr std::size_t kPage = 4096;

void touch(void* p) {
  auto* bytes = static_cast<volatile char*>(p);  // volatile: the writes must happen
  for (std::size_t i = 0; i < kBytes; i += kPage)
    bytes[i] = 1;
}

// Page faults taken while allocating and touching a block of kBytes that was just freed.
long faults_on_reallocation() {
  void* first = std::malloc(kBytes);
  touch(first);
  std::free(first);
  rusage before{}, after{};
  getrusage(RUSAGE_THREAD, &before);
  void* again = std::malloc(kBytes);
  touch(again);
  getrusage(RUSAGE_THREAD, &after);
  std::free(again);
  return after.ru_minflt - before.ru_minflt;
}

// The same on a thread started after the policy (or without it): glibc gives such a thread heaps
// of at most 64 MiB of its own unless the policy puts it on the main heap.
long faults_on_reallocation_in_new_thread() {
  long faults = -1;
  std::thread t([&faults] { faults = faults_on_reallocation(); });
  t.join();
  return faults;
}

// Runs the measurement in a child process, so that the policy does not outlive it.
long measure_in_child(bool retain, bool new_thread = false) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    if (retain) mcr::detail::retain_freed_memory();
    const long faults =
        new_thread ? faults_on_reallocation_in_new_thread() : faults_on_reallocation();
    const ssize_t n = write(fds[1], &faults, sizeof faults);
    _exit(n == static_cast<ssize_t>(sizeof faults) ? 0 : 1);
  }
  close(fds[1]);
  long faults = -1;
  const ssize_t n = read(fds[0], &faults, sizeof faults);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (n != static_cast<ssize_t>(sizeof faults) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("the measuring child failed");
  }
  return faults;
}

struct EnvGuard {
  explicit EnvGuard(const char* value) {
    if (value == nullptr)
      unsetenv("MCR_MALLOC_RETAIN");
    else
      setenv("MCR_MALLOC_RETAIN", value, 1);
  }
  ~EnvGuard() { unsetenv("MCR_MALLOC_RETAIN"); }
};

}  // namespace

TEST(MallocRetain, OnUnlessSetToZero) {
  {
    EnvGuard g(nullptr);
    EXPECT_TRUE(mcr::detail::malloc_retain_requested());
  }
  {
    EnvGuard g("");
    EXPECT_TRUE(mcr::detail::malloc_retain_requested());
  }
  {
    EnvGuard g("1");
    EXPECT_TRUE(mcr::detail::malloc_retain_requested());
  }
  {
    EnvGuard g("0");
    EXPECT_FALSE(mcr::detail::malloc_retain_requested());
  }
}

TEST(MallocRetain, OtherValuesAreRefusedNamingVariableValueAndRule) {
  EnvGuard g("yes");
  try {
    mcr::detail::malloc_retain_requested();
    FAIL() << "MCR_MALLOC_RETAIN=yes was accepted";
  } catch (const mcr::InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("MCR_MALLOC_RETAIN='yes'"), std::string::npos) << what;
    EXPECT_NE(what.find("must be 1"), std::string::npos) << what;
  }
}

TEST(MallocRetain, AFreedBlockComesBackWithoutPageFaults) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "the policy applies to glibc's allocator only";
#endif
  const long pages = static_cast<long>(kBytes / kPage);
  const long by_default = measure_in_child(false);
  const long retained = measure_in_child(true);
  std::printf(
      "page faults reallocating %zu MiB: %ld with glibc's defaults, %ld retained (%ld pages)\n",
      kBytes >> 20, by_default, retained, pages);
  EXPECT_GE(by_default, pages * 9 / 10) << "the reference: the block is unmapped on free";
  EXPECT_LT(retained, pages / 10) << "a retained block must come back already mapped";
}

TEST(MallocRetain, AThreadStartedAfterThePolicyReusesItsBlocksToo) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "the policy applies to glibc's allocator only";
#endif
  const long pages = static_cast<long>(kBytes / kPage);
  const long by_default = measure_in_child(false, true);
  const long retained = measure_in_child(true, true);
  std::printf("page faults reallocating %zu MiB on a new thread: %ld by default, %ld retained\n",
              kBytes >> 20, by_default, retained);
  EXPECT_GE(by_default, pages * 9 / 10) << "the reference: a thread's own heap cannot keep it";
  EXPECT_LT(retained, pages / 10) << "a thread started after the policy must reuse the block";
}
