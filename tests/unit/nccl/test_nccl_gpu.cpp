// Device tests (label `gpu`): the conformance cases of verify/conformance.hpp at one rank on device
// copies of their buffers, through the NCCL backend itself, plus the device-side ordering (caller
// stream -> comm stream -> stream_wait). Skipped with the reason when no CUDA device is present.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "backends/factories.hpp"
#include "bootstrap/bootstrap.hpp"
#include "mcr/errors.hpp"
#include "verify/backend_args.hpp"
#include "verify/conformance.hpp"
#include "verify/device_mirror.hpp"

namespace mcr::detail {
namespace {

/// A store and exchange for a world of one process.
class LocalStore final : public Store {
 public:
  void set(const std::string& key, const Bytes& value) override { data_[key] = value; }
  Bytes get(const std::string& key, std::chrono::milliseconds) override {
    auto it = data_.find(key);
    if (it == data_.end()) throw TimeoutError("no key " + key, "get", 0, "store");
    return it->second;
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    return counters_[key] += delta;
  }
  bool check(const std::vector<std::string>& keys) override {
    for (const auto& k : keys) {
      if (!data_.count(k)) return false;
    }
    return true;
  }

 private:
  std::map<std::string, Bytes> data_;
  std::map<std::string, std::int64_t> counters_;
};

class LocalExchange final : public Exchange {
 public:
  std::vector<Bytes> all_gather(const Bytes& mine) override { return {mine}; }
};

using test::no_device_reason;

#define SKIP_WITHOUT_GPU()                                                 \
  do {                                                                     \
    const std::string reason_ = no_device_reason();                        \
    if (!reason_.empty()) GTEST_SKIP() << reason_ << ": GPU test skipped"; \
  } while (false)

class NcclDevice : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!no_device_reason().empty()) return;
    bootstrap_ = new Bootstrap(LaunchInfo{}, std::make_unique<LocalExchange>(),
                               std::make_unique<LocalStore>(), std::chrono::seconds(30));
    backend_ = nccl_backend_factory().create_world(*bootstrap_).release();
  }
  static void TearDownTestSuite() {
    delete backend_;
    delete bootstrap_;
    backend_ = nullptr;
    bootstrap_ = nullptr;
  }

  /// Runs `args` and polls its completion (NCCL never completes inside start()).
  static void run(const OpArgs& args) {
    auto op = backend_->start(args);
    ASSERT_NE(op, nullptr) << "NCCL must return a pending op";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!op->test()) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "timed out";
      std::this_thread::yield();
    }
  }

  static Bootstrap* bootstrap_;
  static Backend* backend_;
};
Bootstrap* NcclDevice::bootstrap_ = nullptr;
Backend* NcclDevice::backend_ = nullptr;

/// Device buffer holding `count` elements of `dtype`, filled with a byte pattern that is a valid,
/// finite value in every type (small positive integers / normal floats).
struct DeviceBuffer {
  explicit DeviceBuffer(std::size_t size) : bytes(size) {
    EXPECT_EQ(cudaMalloc(&ptr, size == 0 ? 1 : size), cudaSuccess);
    EXPECT_EQ(cudaMemset(ptr, 0, size == 0 ? 1 : size), cudaSuccess);
  }
  ~DeviceBuffer() { (void)cudaFree(ptr); }
  void upload(const std::vector<std::uint8_t>& host) {
    ASSERT_EQ(cudaMemcpy(ptr, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<std::uint8_t> download() const {
    std::vector<std::uint8_t> host(bytes);
    EXPECT_EQ(cudaMemcpy(host.data(), ptr, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }
  void* ptr = nullptr;
  std::size_t bytes;
};

/// `count` elements of `t` holding distinct values (exact in every type), as bytes.
std::vector<std::uint8_t> pattern(DType t, std::size_t count) {
  std::vector<std::uint8_t> out(count * dtype_size(t));
  for (std::size_t i = 0; i < count; ++i) {
    test::encode_element(t, test::data_value(t, 0, i, 1), out.data() + i * dtype_size(t));
  }
  return out;
}

// The conformance cases at one rank (every op x dtype x reduce op x count x placement) on device
// copies of their buffers. The send/recv exchange is left out: at one rank it would be an exchange
// with itself, which NCCL only completes inside a group; the barrier has a test of its own.
TEST_F(NcclDevice, ConformanceCasesAtOneRank) {
  SKIP_WITHOUT_GPU();
  ASSERT_EQ(backend_->size(), 1);
  test::MatrixOptions options;
  options.sync_and_async = false;  // the backend sees no difference; the communicator does
  int ran = 0;
  int unsupported = 0;
  std::uint64_t sequence = 1;
  for (const test::OpCase& c : test::conformance_cases(1, options)) {
    if (c.op == OpType::send || c.op == OpType::barrier) continue;
    if (!backend_->supports(c.op, c.dtype, c.reduce, Device::Kind::cuda).ok) {
      ++unsupported;
      continue;
    }
    SCOPED_TRACE(test::describe(c));
    test::PreparedCase prepared(c, 0, 1);
    test::DeviceMirror mirror(prepared, 0);
    for (OpArgs a : test::backend_args(prepared, mirror.placement(), sequence++)) {
      a.timeout = std::chrono::seconds(30);
      run(a);
    }
    mirror.download();
    EXPECT_EQ(prepared.verify(), "");
    ++ran;
  }
  std::printf("[ nccl ] %d conformance cases at one rank, %d unsupported skipped\n", ran,
              unsupported);
  EXPECT_GT(ran, 0);
}

TEST_F(NcclDevice, BarrierCompletes) {
  SKIP_WITHOUT_GPU();
  OpArgs a;
  a.op = OpType::barrier;
  a.op_name = "barrier";
  a.device = Device::cuda(0);
  run(a);
}

// The op must read what the caller's stream wrote, and a consumer stream made to wait through
// stream_wait must see the result, without any host synchronisation in between.
TEST_F(NcclDevice, OrdersAfterTheCallerStreamAndBeforeTheConsumer) {
  SKIP_WITHOUT_GPU();
  const std::size_t n = 1 << 22;  // large enough that the copies take measurable time
  const auto host = pattern(DType::f32, n);
  DeviceBuffer src(host.size()), in(host.size()), out(host.size()), check(host.size());
  src.upload(host);
  cudaStream_t producer = nullptr;
  cudaStream_t consumer = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(in.ptr, src.ptr, host.size(), cudaMemcpyDeviceToDevice, producer),
            cudaSuccess);
  OpArgs a;
  a.op = OpType::all_reduce;
  a.op_name = "all_reduce";
  a.dtype = DType::f32;
  a.device = Device::cuda(0);
  a.stream = producer;
  a.count = n;
  a.in = in.ptr;
  a.out = out.ptr;
  auto op = backend_->start(a);
  ASSERT_NE(op, nullptr);
  ASSERT_TRUE(op->stream_wait(consumer));
  ASSERT_EQ(cudaMemcpyAsync(check.ptr, out.ptr, host.size(), cudaMemcpyDeviceToDevice, consumer),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
  EXPECT_EQ(check.download(), host);
  while (!op->test())
    std::this_thread::yield();
  (void)cudaStreamDestroy(producer);
  (void)cudaStreamDestroy(consumer);
}

TEST_F(NcclDevice, RejectsCpuTensorsAndForeignDevices) {
  SKIP_WITHOUT_GPU();
  OpArgs a;
  a.op = OpType::all_reduce;
  a.op_name = "all_reduce";
  a.dtype = DType::f32;
  a.count = 1;
  float x = 1;
  a.in = &x;
  a.out = &x;
  EXPECT_THROW((void)backend_->start(a), UnsupportedError);
  a.device = Device::cuda(99);
  EXPECT_THROW((void)backend_->start(a), InvalidArgument);
}

TEST_F(NcclDevice, SplitKeepsTheMemberAndDropsNonMembers) {
  SKIP_WITHOUT_GPU();
  auto child = backend_->split({0}, 1);
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(child->rank(), 0);
  EXPECT_EQ(child->size(), 1);
}

TEST(NcclFactory, ReportsWhyItIsUnusableWithoutADevice) {
  Bootstrap bootstrap(LaunchInfo{}, std::make_unique<LocalExchange>(),
                      std::make_unique<LocalStore>(), std::chrono::seconds(1));
  const std::string reason = nccl_backend_factory().unusable_reason(bootstrap);
  EXPECT_EQ(nccl_backend_factory().name, "nccl");
  if (no_device_reason().empty()) {
    EXPECT_EQ(reason, "");
  } else {
    EXPECT_NE(reason.find("cudaGetDeviceCount"), std::string::npos) << reason;
  }
}

}  // namespace
}  // namespace mcr::detail
