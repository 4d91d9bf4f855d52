// Provenance of a tuning table: where and with which libraries it was measured.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <map>

#include <fmt/format.h>

#include "mcr/bench/provenance.hpp"
#include "mcr/comm/info.hpp"

namespace mcr::bench {
namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

// mcr's version, then each compiled backend's library as its factory reports it.
std::string library_versions() {
  std::string out = fmt::format("mcr {}", version());
  for (const auto& b : runtime_info().backends)
    out += "; " + b.library;
  return out;
}

}  // namespace

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  std::size_t pos = 0;
  while (pos < raw.size()) {
    const auto end = raw.find('\0', pos);
    const auto arg = raw.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (!out.empty()) out += ' ';
    out += arg.find_first_of(" \t\"'") == std::string::npos ? arg : fmt::format("'{}'", arg);
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return out;
}

std::map<std::string, std::string> provenance(Communicator& comm, const std::string& command) {
  // Host names travel as fixed-size records so one all_gather serves every rank.
  constexpr std::size_t kHostLen = 256;
  std::vector<std::uint8_t> mine(kHostLen, 0);
  gethostname(reinterpret_cast<char*>(mine.data()), kHostLen - 1);
  std::vector<std::uint8_t> all(kHostLen * static_cast<std::size_t>(comm.size()));
  comm.all_gather(mine, all);
  // Names for people; the counts come from the communicator's topology (the host map every rank
  // reported at start-up), the same numbers the table's entries carry. Names can be fewer than
  // hosts: containers and network namespaces repeat a host name.
  std::map<std::string, int> per_name;
  for (int q = 0; q < comm.size(); ++q) {
    const auto* p =
        reinterpret_cast<const char*>(all.data() + static_cast<std::size_t>(q) * kHostLen);
    ++per_name[std::string(p, strnlen(p, kHostLen))];
  }
  std::string names;
  for (const auto& [h, n] : per_name)
    names += (names.empty() ? "" : ",") + h;
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &utc);
  std::string backends;
  for (const auto& b : comm.backends())
    backends += (backends.empty() ? "" : ",") + b;
  const int rph = comm.ranks_per_host();
  return {{"hosts", std::to_string(comm.hosts())},
          {"host_names", names},
          {"ranks", std::to_string(comm.size())},
          {"ranks_per_host", rph > 0 ? std::to_string(rph) : std::string("uneven")},
          {"cpu", cpu_model()},
          {"gpu", "none (host buffers)"},
          {"libraries", library_versions()},
          {"backends", backends},
          {"date", date},
          {"command", command}};
}

}  // namespace mcr::bench
