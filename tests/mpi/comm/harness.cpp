#include "harness.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "file_store.hpp"

namespace mcr::test {
namespace {

Communicator g_world;
std::vector<std::string> g_args;
std::shared_ptr<LastOpObserver> g_observer;
std::shared_ptr<FileStore> g_given_store;

// An integer launcher variable: Open MPI's when present, else the torchrun-style one.
int launcher_int(const char* ompi, const char* torchrun) {
  const char* v = std::getenv(ompi);
  if (v == nullptr) v = std::getenv(torchrun);
  return v != nullptr ? std::atoi(v) : -1;
}

// Prints failed assertions of a non-zero rank (whose default gtest printer is muted so that the
// log is not N interleaved copies of the same progress output).
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 r.file_name() != nullptr ? r.file_name() : "?", r.line_number(), r.message());
    std::fflush(stderr);
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed()) {
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
      std::fflush(stderr);
    }
  }

 private:
  int rank_;
};

// Combines the outcome of every rank through the runtime itself. Returns the job's exit status.
int job_verdict(bool local_failed) {
  const int size = g_world.size();
  std::vector<std::int32_t> failed(static_cast<std::size_t>(size), 0);
  std::int32_t mine = local_failed ? 1 : 0;
  try {
    CallOptions opts;
    opts.timeout = std::chrono::seconds(60);
    g_world.all_gather(Tensor(&mine, 1, DType::i32),
                       Tensor(failed.data(), failed.size(), DType::i32), opts);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[%s] could not combine the verdict of all ranks: %s\n",
                 rank_tag().c_str(), e.what());
    return 1;
  }
  std::vector<int> failed_ranks;
  for (int r = 0; r < size; ++r) {
    if (failed[static_cast<std::size_t>(r)] != 0) failed_ranks.push_back(r);
  }
  if (g_world.rank() == 0) {
    if (failed_ranks.empty()) {
      std::printf("[mcr-test] all %d ranks passed\n", size);
    } else {
      std::printf("[mcr-test] FAILED on rank(s) %s of %d\n",
                  fmt::format("{}", fmt::join(failed_ranks, ", ")).c_str(), size);
    }
    std::fflush(stdout);
  }
  return failed_ranks.empty() ? 0 : 1;
}

}  // namespace

Communicator& world() {
  return g_world;
}

std::string rank_tag() {
  return fmt::format("rank {}/{}", g_world.rank(), g_world.size());
}

std::string option(std::string_view name, const char* env_name, std::string fallback) {
  const std::string prefix = fmt::format("--{}=", name);
  for (const auto& a : g_args) {
    if (a.starts_with(prefix)) return a.substr(prefix.size());
  }
  if (const char* v = std::getenv(env_name); v != nullptr && *v != '\0') return v;
  return fallback;
}

void LastOpObserver::on_complete(const OpRecord& record) noexcept {
  std::lock_guard lock(mutex_);
  last_ = record;
  ++seen_;
}

OpRecord LastOpObserver::last() const {
  std::lock_guard lock(mutex_);
  return last_;
}

std::size_t LastOpObserver::seen() const {
  std::lock_guard lock(mutex_);
  return seen_;
}

LastOpObserver& observer() {
  return *g_observer;
}

FileStore* given_store() {
  return g_given_store.get();
}

}  // namespace mcr::test

int main(int argc, char** argv) {
  using namespace mcr::test;
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i)
    g_args.emplace_back(argv[i]);

  try {
    mcr::InitOptions init;
    // A generous default so that a stalled operation fails the test instead of hanging it; the
    // environment (MCR_TIMEOUT) overrides it.
    if (std::getenv("MCR_TIMEOUT") == nullptr) init.timeout = std::chrono::seconds(60);
    // MCR_TEST_GIVEN_STORE=<dir>: form the world through a file store under <dir>
    // (InitOptions::store) instead of mcr's own TCP store.
    if (const char* base = std::getenv("MCR_TEST_GIVEN_STORE"); base != nullptr && *base != '\0') {
      g_given_store = std::make_shared<FileStore>(job_store_dir(base));
      init.store = g_given_store;
      init.rank = launcher_int("OMPI_COMM_WORLD_RANK", "RANK");
      init.size = launcher_int("OMPI_COMM_WORLD_SIZE", "WORLD_SIZE");
    }
    g_world = mcr::init(init);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mcr::init failed: %s\n", e.what());
    return 2;
  }
  g_observer = std::make_shared<LastOpObserver>();
  g_world.set_observer(g_observer);

  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (g_world.rank() != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(g_world.rank()));
  }

  const bool local_failed = RUN_ALL_TESTS() != 0;
  const int status = job_verdict(local_failed);
  const bool first = g_world.rank() == 0;
  g_world = mcr::Communicator();
  mcr::finalize();
  // finalize() returned on rank 0 only once every rank was done with the store.
  if (g_given_store && first) std::filesystem::remove_all(g_given_store->dir());
  return status;
}
