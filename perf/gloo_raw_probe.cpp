// Raw Gloo against mcr's Gloo backend, in one run: gloo::allreduce on a context of its own (same
// TCP transport, same address choice as mcr: loopback when every rank is on this host, the host
// name otherwise) against comm.all_reduce forced onto the "gloo" backend, same buffers, same
// process, alternating blocks so that load which drifts during the run hits both alike. Reports per
// size the median wall time per call (max across ranks), the CPU time per call (user + system of
// the whole process, all threads, mean across ranks: it does not depend on how busy the machine
// is), and the median of the paired ratios mcr / raw.
//
//   mpirun -np 2 bench_gloo_raw [--op all_reduce|send_recv] [--reps R] [--min-bytes B]
//   [--max-bytes B] [--block-ms MS] [--async] [--count N]
//
// --async times mcr's iall_reduce + wait (the worker thread and the wait loop) instead of the
// blocking call, which runs on the caller's thread.
//
// --op send_recv times the exchange `mcr bench --op send_recv` times: every rank receives from
// its left neighbour and sends to its right one, both posted before either is waited for. Raw
// Gloo posts the two unbound buffers and waits for each in the caller's thread; mcr posts irecv
// and isend on the "gloo" backend and waits for both Works.
//
// --count N counts instructions instead of timing (run under callgrind, every thread of the
// process counted, scripts/gloo-instructions): per size, N raw calls and then N mcr calls, each
// phase dumped to a file of its own (.1 raw at the first size, .2 mcr at it, .3 raw at the next
// ...); rank 0 also prints each thread's CPU time per call in each phase, from /proc. What gloo
// does is the same on both sides, so the difference per call is mcr's own work:
// its dispatch and the hand-offs between threads, polling included.
//
// The raw context meets through a gloo FileStore in a directory rank 0 creates and announces
// through mcr; the namespaces of scripts/cluster share the file system, so it works there too.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include "mcr/bench.hpp"
#include "mcr/comm.hpp"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_DUMP_STATS_AT(name) (void)(name)
#endif

namespace {

using Clock = std::chrono::steady_clock;

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// CPU seconds of every thread of this process, by thread id, with the thread's name: what each
// thread spent over a phase of --count (a thread that only one side wakes, or one that spins on
// idle cores, shows up here and not in the instruction count of the calling thread).
struct ThreadCpu {
  std::string name;
  double seconds = 0;
};
std::map<int, ThreadCpu> thread_cpu() {
  std::map<int, ThreadCpu> out;
  const double tick = 1.0 / static_cast<double>(::sysconf(_SC_CLK_TCK));
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream stat(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')');  // the name may hold blanks; the fields follow its ')'
    if (close == std::string::npos) continue;
    std::istringstream fields(text.substr(close + 2));
    std::string field;
    double ticks = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
      if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
    }
    ThreadCpu t;
    t.name = text.substr(text.find('(') + 1, close - text.find('(') - 1);
    t.seconds = ticks * tick;
    out[std::stoi(entry.path().filename().string())] = t;
  }
  return out;
}

// One line per thread that used CPU between `before` and now, in microseconds per call.
void print_thread_cpu(const char* side, std::size_t bytes, int calls,
                      const std::map<int, ThreadCpu>& before) {
  for (const auto& [tid, t] : thread_cpu()) {
    const auto was = before.find(tid);
    const double used = t.seconds - (was == before.end() ? 0.0 : was->second.seconds);
    if (used <= 0) continue;
    fmt::print("{:>10} {:>4} thread {:>7} {:<16} {:>9.2f} cpu us/call\n", bytes, side, tid, t.name,
               used * 1e6 / calls);
  }
}

std::string gloo_address() {
  if (const char* h = std::getenv("MCR_GLOO_HOSTNAME"); h != nullptr && *h != '\0') return h;
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const char* world = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (local == nullptr || world == nullptr || std::strcmp(local, world) == 0) return "127.0.0.1";
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

struct Block {
  double wall = 0;  // seconds per call on this rank
  double cpu = 0;   // process CPU seconds per call on this rank
};

template <class F>
Block time_block(int iterations, F&& call) {
  const double c0 = cpu_seconds();
  const auto t0 = Clock::now();
  for (int i = 0; i < iterations; ++i)
    call();
  const auto t1 = Clock::now();
  const double c1 = cpu_seconds();
  return {std::chrono::duration<double>(t1 - t0).count() / iterations, (c1 - c0) / iterations};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 11;
  std::size_t min_bytes = 4, max_bytes = std::size_t{64} << 20;
  double block_s = 0.02;
  bool async = false;
  std::string op = "all_reduce";
  int count_calls = 0;  // --count: instructions, not time
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--async") {
      async = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) {
      fmt::print(stderr, "bench_gloo_raw: {} needs a value\n", a);
      return 2;
    }
    if (a == "--op")
      op = argv[i + 1];
    else if (a == "--count")
      count_calls = std::atoi(argv[i + 1]);
    else if (a == "--reps")
      reps = std::atoi(argv[i + 1]);
    else if (a == "--min-bytes")
      min_bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--max-bytes")
      max_bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--block-ms")
      block_s = std::atof(argv[i + 1]) / 1000;
    else {
      fmt::print(stderr, "bench_gloo_raw: unknown argument '{}'\n", a);
      return 2;
    }
  }
  if (reps < 1 || count_calls < 0 || min_bytes < 4 || max_bytes < min_bytes || !(block_s > 0) ||
      (op != "all_reduce" && op != "send_recv")) {
    fmt::print(stderr,
               "bench_gloo_raw: need --op all_reduce or send_recv, --reps >= 1, "
               "4 <= --min-bytes <= --max-bytes, --block-ms > 0\n");
    return 2;
  }
  mcr::Communicator comm = mcr::init();
  const mcr::CallOptions on_gloo{.backend = "gloo"};

  // The raw context: a FileStore directory named by rank 0's pid, announced through mcr.
  std::vector<std::int64_t> pid{comm.rank() == 0 ? static_cast<std::int64_t>(::getpid()) : 0};
  comm.all_reduce(pid, mcr::ReduceOp::sum);
  const std::string dir = fmt::format("/tmp/mcr-gloo-probe-{}", pid[0]);
  if (comm.rank() == 0) std::filesystem::create_directories(dir);
  comm.barrier();
  gloo::transport::tcp::attr attr;
  attr.hostname = gloo_address();
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto raw = std::make_shared<gloo::rendezvous::Context>(comm.rank(), comm.size());
  {
    gloo::rendezvous::FileStore store(dir);
    gloo::rendezvous::PrefixStore prefixed("raw", store);
    raw->connectFullMesh(prefixed, device);
  }
  comm.barrier();
  if (comm.rank() == 0) std::filesystem::remove_all(dir);
  const bool p2p = op == "send_recv";
  if (p2p && comm.size() < 2) {
    fmt::print(stderr, "bench_gloo_raw: --op send_recv needs at least 2 ranks\n");
    mcr::finalize();
    return 2;
  }
  const int left = (comm.rank() + comm.size() - 1) % comm.size();
  const int right = (comm.rank() + 1) % comm.size();

  auto raw_barrier = [&] {
    gloo::BarrierOptions o(raw);
    gloo::barrier(o);
  };
  // Both sides' results, reduced across ranks with raw Gloo so mcr's work stays in its own blocks.
  auto reduce_max = [&](std::vector<double>& v) {
    gloo::AllreduceOptions o(raw);
    o.setOutput(v.data(), v.size());
    o.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<double>));
    gloo::allreduce(o);
  };

  if (comm.rank() == 0) {
    fmt::print(
        "# raw Gloo vs mcr 'gloo' backend ({}), {} ranks, fp32, {} alternating blocks of ~{:.0f} "
        "ms per size\n",
        p2p ? "irecv from left + isend to right, wait both"
            : (async ? "iall_reduce + wait, sum" : "all_reduce, sum"),
        comm.size(), reps, block_s * 1e3);
    fmt::print("{:>10} {:>7} {:>12} {:>12} {:>7} {:>13} {:>13} {:>8}\n", "bytes", "iters", "raw us",
               "mcr us", "ratio", "raw cpu us", "mcr cpu us", "wrong");
  }
  bool failed = false;
  for (std::size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const std::size_t count = bytes / sizeof(float);
    std::vector<float> in(count, 1.0f), out(count, 0.0f);
    if (p2p) std::fill(in.begin(), in.end(), static_cast<float>(comm.rank() + 1));
    // The slot of the exchange, as mcr's p2p messages of tag 0 use a slot of their own.
    constexpr std::uint64_t kRawSlot = 7;
    auto raw_exchange = [&] {
      // A fresh pair of buffers per call, as torch's ProcessGroupGloo and mcr create them.
      auto recv = raw->createUnboundBuffer(out.data(), bytes);
      auto send = raw->createUnboundBuffer(in.data(), bytes);
      recv->recv(left, kRawSlot);
      send->send(right, kRawSlot);
      recv->waitRecv();
      send->waitSend();
    };
    auto raw_call = [&] {
      if (p2p) {
        raw_exchange();
        return;
      }
      gloo::AllreduceOptions o(raw);
      o.setInput(in.data(), count);
      o.setOutput(out.data(), count);
      o.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      gloo::allreduce(o);
    };
    auto mcr_call = [&] {
      if (p2p) {
        mcr::Work r = comm.irecv(out, left, on_gloo);
        mcr::Work w = comm.isend(in, right, on_gloo);
        r.wait();
        w.wait();
        return;
      }
      if (async) {
        comm.iall_reduce(in, out, mcr::ReduceOp::sum, on_gloo).wait();
      } else {
        comm.all_reduce(in, out, mcr::ReduceOp::sum, on_gloo);
      }
    };
    // Warm both up, then size the blocks from raw Gloo's pace (max across ranks).
    time_block(3, raw_call);
    time_block(3, mcr_call);
    if (count_calls > 0) {
      raw_barrier();
      auto threads = thread_cpu();
      CALLGRIND_ZERO_STATS;
      time_block(count_calls, raw_call);
      CALLGRIND_DUMP_STATS_AT("raw");
      if (comm.rank() == 0) print_thread_cpu("raw", bytes, count_calls, threads);
      raw_barrier();
      threads = thread_cpu();
      CALLGRIND_ZERO_STATS;
      time_block(count_calls, mcr_call);
      CALLGRIND_DUMP_STATS_AT("mcr");
      if (comm.rank() == 0) print_thread_cpu("mcr", bytes, count_calls, threads);
      if (comm.rank() == 0) fmt::print("{:>10} counted {} calls each\n", bytes, count_calls);
      std::fflush(stdout);  // a run stopped at its time limit keeps the sizes it finished
      continue;
    }
    std::vector<double> pace{time_block(5, raw_call).wall};
    reduce_max(pace);
    const int iters = std::clamp(static_cast<int>(block_s / std::max(pace[0], 1e-7)), 2, 20000);
    std::vector<double> walls(2 * static_cast<std::size_t>(reps)),
        cpus(2 * static_cast<std::size_t>(reps));
    for (int r = 0; r < reps; ++r) {
      for (int k = 0; k < 2; ++k) {
        const bool mcr_side = (r + k) % 2 == 1;  // alternate which side goes first
        raw_barrier();
        const Block b = mcr_side ? time_block(iters, mcr_call) : time_block(iters, raw_call);
        const std::size_t slot = 2 * static_cast<std::size_t>(r) + (mcr_side ? 1 : 0);
        walls[slot] = b.wall;
        cpus[slot] = b.cpu / comm.size();  // summed below into the mean across ranks
      }
    }
    reduce_max(walls);
    {
      gloo::AllreduceOptions o(raw);
      o.setOutput(cpus.data(), cpus.size());
      o.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<double>));
      gloo::allreduce(o);
    }
    std::vector<double> raw_w, mcr_w, raw_c, mcr_c, ratios;
    for (int r = 0; r < reps; ++r) {
      const auto s = 2 * static_cast<std::size_t>(r);
      raw_w.push_back(walls[s]);
      mcr_w.push_back(walls[s + 1]);
      raw_c.push_back(cpus[s]);
      mcr_c.push_back(cpus[s + 1]);
      ratios.push_back(walls[s + 1] / std::max(walls[s], 1e-12));
    }
    // Both sides computed the same sum: every element must be the rank count (send_recv: the left
    // neighbour's rank + 1).
    const float expected = p2p ? static_cast<float>(left + 1) : static_cast<float>(comm.size());
    std::size_t wrong = 0;
    for (float v : out)
      wrong += v != expected ? 1 : 0;
    if (comm.rank() == 0) {
      fmt::print("{:>10} {:>7} {:>12.2f} {:>12.2f} {:>7.3f} {:>13.2f} {:>13.2f} {:>8}\n", bytes,
                 iters, median(raw_w) * 1e6, median(mcr_w) * 1e6, median(ratios),
                 median(raw_c) * 1e6, median(mcr_c) * 1e6, wrong);
    }
    if (wrong != 0) {
      fmt::print(stderr, "bench_gloo_raw: rank {}: {} wrong elements at {} bytes\n", comm.rank(),
                 wrong, bytes);
      failed = true;
    }
  }
  mcr::finalize();
  return failed ? 1 : 0;
}
