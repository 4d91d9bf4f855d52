#include "mcr/gemmbench/cpu_info.hpp"

#include <sched.h>

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace mcr::codesign::bench {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool has_flag(std::string_view flags, std::string_view flag) {
  std::size_t pos = 0;
  while ((pos = flags.find(flag, pos)) != std::string_view::npos) {
    const bool starts = pos == 0 || flags[pos - 1] == ' ';
    const bool ends = pos + flag.size() == flags.size() || flags[pos + flag.size()] == ' ';
    if (starts && ends) return true;
    pos += flag.size();
  }
  return false;
}

int allowed_cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
}

// The file `relative` under /sys/devices/system/cpu/cpuN/ (a CPU list such as
// topology/thread_siblings_list) of every CPU this process may run on; empty when any is
// unreadable.
std::vector<std::string> allowed_cpu_lists(const std::string& relative) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  std::vector<std::string> lists;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    const std::string text =
        read_file(fmt::format("/sys/devices/system/cpu/cpu{}/{}", cpu, relative));
    const std::string_view list = trim(text);
    if (list.empty()) return {};
    lists.emplace_back(list);
  }
  return lists;
}

int count_distinct(std::vector<std::string> lists) {
  std::sort(lists.begin(), lists.end());
  lists.erase(std::unique(lists.begin(), lists.end()), lists.end());
  return static_cast<int>(lists.size());
}

void read_sysfs_caches(CpuInfo& info) {
  namespace fs = std::filesystem;
  const fs::path base = "/sys/devices/system/cpu/cpu0/cache";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(base, ec)) {
    if (entry.path().filename().string().rfind("index", 0) != 0) continue;
    CpuCache cache;
    // trim() returns a view: the file's text must outlive it.
    const std::string level_file = read_file(entry.path() / "level");
    const std::string_view level_text = trim(level_file);
    std::from_chars(level_text.data(), level_text.data() + level_text.size(), cache.level);
    cache.type = std::string(trim(read_file(entry.path() / "type")));
    cache.size_bytes = parse_cache_size(trim(read_file(entry.path() / "size")));
    if (cache.level == 1 && cache.type == "Data") info.l1d_bytes = cache.size_bytes;
    if (cache.level == 2) info.l2_bytes = cache.size_bytes;
    if (cache.level == 3) {
      info.l3_bytes = cache.size_bytes;
      // cpu0's L3 is one of several on a chiplet or multi-socket CPU (one per CCD on EPYC): the
      // rotation must exceed them all, or operands stay cached in another one.
      const int instances = count_cache_instances(
          allowed_cpu_lists("cache/" + entry.path().filename().string() + "/shared_cpu_list"));
      info.l3_instances = std::max(1, instances);
    }
  }
}

void read_sysfs_frequency(CpuInfo& info) {
  // cpuinfo_max_freq is the rated maximum in kHz; prefer it to the instantaneous "cpu MHz".
  const std::string file = read_file("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  const std::string_view text = trim(file);
  long khz = 0;
  if (!text.empty() &&
      std::from_chars(text.data(), text.data() + text.size(), khz).ec == std::errc{} && khz > 0) {
    info.freq_ghz = static_cast<double>(khz) / 1e6;
    info.freq_source = "sysfs cpuinfo_max_freq";
  }
}

}  // namespace

int CpuInfo::fma_datapath_bits() const {
  const bool amd_split_512 = vendor == "AuthenticAMD" && family <= 0x19;
  return amd_split_512 ? std::min(simd_bits, 256) : simd_bits;
}

double CpuInfo::fp32_flop_per_cycle() const {
  const int pipes = fma ? 2 : 1;
  const int lanes = fma_datapath_bits() / 32;
  return 2.0 * pipes * lanes;
}

double CpuInfo::fp32_peak_tflops() const {
  return static_cast<double>(cores) * freq_ghz * fp32_flop_per_cycle() / 1000.0;
}

std::int64_t CpuInfo::llc_bytes() const {
  return std::max({l1d_bytes, l2_bytes, l3_bytes * std::max(1, l3_instances)});
}

std::int64_t CpuInfo::llc_bytes_for(int threads) const {
  const int instances = std::clamp(threads, 1, std::max(1, l3_instances));
  return std::max({l1d_bytes, l2_bytes, l3_bytes * instances});
}

int count_physical_cores(const std::vector<std::string>& thread_siblings_lists) {
  return count_distinct(thread_siblings_lists);
}

int count_cache_instances(const std::vector<std::string>& shared_cpu_lists) {
  return count_distinct(shared_cpu_lists);
}

std::int64_t parse_cache_size(std::string_view text) {
  text = trim(text);
  std::int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || value < 0) return 0;
  const std::string_view suffix = trim(std::string_view(ptr, text.data() + text.size() - ptr));
  if (suffix.empty() || suffix == "B") return value;
  if (suffix == "K" || suffix == "KB" || suffix == "KiB") return value * 1024;
  if (suffix == "M" || suffix == "MB" || suffix == "MiB") return value * 1024 * 1024;
  if (suffix == "G" || suffix == "GB" || suffix == "GiB") return value * 1024 * 1024 * 1024;
  return 0;
}

void parse_proc_cpuinfo(std::string_view text, CpuInfo& info) {
  std::string_view flags;
  bool first_block = true;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto eol = std::min(text.find('\n', pos), text.size());
    const auto line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (trim(line).empty()) {
      first_block = false;  // only the first processor's block matters; all cores are alike here
      continue;
    }
    if (!first_block) continue;
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const auto key = trim(line.substr(0, colon));
    const auto value = trim(line.substr(colon + 1));
    if (key == "vendor_id") info.vendor = std::string(value);
    if (key == "model name") info.model_name = std::string(value);
    if (key == "cpu family")
      std::from_chars(value.data(), value.data() + value.size(), info.family);
    if (key == "flags" || key == "Features") flags = value;
    if (key == "cpu MHz" && info.freq_ghz == 0.0) {
      // from_chars for double is available in libstdc++ 11+.
      double mhz = 0;
      if (std::from_chars(value.data(), value.data() + value.size(), mhz).ec == std::errc{} &&
          mhz > 0) {
        info.freq_ghz = mhz / 1000.0;
        info.freq_source = "/proc/cpuinfo cpu MHz";
      }
    }
  }
  if (has_flag(flags, "avx512f")) {
    info.simd_bits = 512;
  } else if (has_flag(flags, "avx2") || has_flag(flags, "avx")) {
    info.simd_bits = 256;
  } else {
    info.simd_bits = 128;  // SSE2 is baseline on x86-64; NEON ("Features: asimd") is 128 bits too
  }
  info.fma = has_flag(flags, "fma") || has_flag(flags, "asimd");
  info.avx512_bf16 = has_flag(flags, "avx512_bf16");
}

double measure_core_clock_ghz() {
#if defined(__x86_64__)
  constexpr std::uint64_t kIterations = 250'000;  // x 16 adds = 4 M cycles, ~1 ms at 4 GHz
  double best = 0;
  for (int run = 0; run < 16; ++run) {
    std::uint64_t counter = kIterations;
    std::uint64_t sink = 0;
    const auto start = std::chrono::steady_clock::now();
    // 16 adds into one register form a dependency chain of 16 cycles per iteration; the loop
    // counter runs in parallel. Preemption can only make a run slower, hence the best of 16.
    __asm__ volatile(
        "1:\n\t"
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        "dec %1\n\t"
        "jnz 1b\n\t"
        : "+r"(sink), "+r"(counter)
        :
        : "cc");
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 16.0 * static_cast<double>(kIterations) / s / 1e9);
  }
  return best;
#else
  return 0.0;
#endif
}

CpuInfo detect_cpu() {
  CpuInfo info;
  info.logical_cpus = allowed_cpu_count();
  const int physical = count_physical_cores(allowed_cpu_lists("topology/thread_siblings_list"));
  info.cores = physical > 0 ? std::min(physical, info.logical_cpus) : info.logical_cpus;
  read_sysfs_frequency(info);
  parse_proc_cpuinfo(read_file("/proc/cpuinfo"), info);
  if (info.freq_source != "sysfs cpuinfo_max_freq") {
    const double measured = measure_core_clock_ghz();
    if (measured > info.freq_ghz) {
      info.freq_source = fmt::format("measured (dependent-add loop); /proc/cpuinfo says {:.3f} GHz",
                                     info.freq_ghz);
      info.freq_ghz = measured;
    }
  }
  read_sysfs_caches(info);
  return info;
}

}  // namespace mcr::codesign::bench
