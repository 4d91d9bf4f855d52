// Configuration faults at init, one scenario per run (argv[1]), on every rank of an mpiexec job.
// Each rank sets its own environment before init() (choosing by OMPI_COMM_WORLD_RANK where the
// scenario gives ranks different inputs), then asserts the exact error type, the key words of the
// message and that it came within a few seconds, not after a hang.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "mcr/comm.hpp"
#include "mcr/comm/info.hpp"
#include "mcr/errors.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// The bound on init()'s error: bootstrap plus one exchange take well under a second even with
// oversubscribed ranks; the scenarios it guards used to hang until the test's timeout.
constexpr double kBoundSeconds = 10.0;

struct Expect {
  std::string type;                // "InvalidArgument" or "MismatchError"
  std::vector<std::string> words;  // each must appear in the message
};

struct Scenario {
  std::function<void(int rank, const std::string& dir)> setup;
  std::function<Expect(int rank)> expect;
};

void set(const char* name, const std::string& value) {
  setenv(name, value.c_str(), 1);
}

std::string write_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) throw std::runtime_error(fmt::format("cannot write {}", path));
  std::fputs(text.c_str(), f);
  std::fclose(f);
  return path;
}

std::map<std::string, Scenario> scenarios() {
  std::map<std::string, Scenario> s;
  // A rule naming a backend mcr does not have: the same InvalidArgument on every rank, naming the
  // rule's number and text and the known backends.
  s["unknown_rule_backend"] = {
      [](int, const std::string&) { set("MCR_RULES", "all_reduce:0-64K=mpi;all_reduce:*=glo"); },
      [](int) {
        return Expect{"InvalidArgument",
                      {"MCR_RULES", "rule #2", "'all_reduce:*=glo'", "unknown backend 'glo'",
                       "known backends: nccl, mpi, gloo"}};
      }};
  // A table `mcr tune --validate` rejects (a negative min_bytes, a gap): rejected at load.
  s["invalid_table"] = {
      [](int rank, const std::string& dir) {
        const std::string path =
            write_file(fmt::format("{}/config_fault_table.{}.json", dir, rank),
                       R"({"format": "mcr-tuning", "version": 1, "entries": [{"op": "all_reduce",
                "ranges": [{"min_bytes": -5, "max_bytes": 99, "backend": "mpi"},
                           {"min_bytes": 200, "max_bytes": null, "backend": "gloo"}]}]})");
        set("MCR_TUNING", path);
      },
      [](int rank) {
        return Expect{"InvalidArgument",
                      {"MCR_TUNING", fmt::format("config_fault_table.{}.json", rank),
                       "entries[0].ranges[0]: min_bytes -5 is negative", "mcr tune --validate"}};
      }};
  // Different backend lists: MismatchError on both ranks before any backend comes up (this hung in
  // the bring-up of the backend only rank 0 created).
  s["backends_differ"] = {
      [](int rank, const std::string&) { set("MCR_BACKENDS", rank == 0 ? "mpi,gloo" : "gloo"); },
      [](int) {
        return Expect{"MismatchError",
                      {"MCR_BACKENDS", "rank 0 has 'mpi,gloo'", "rank 1 has 'gloo'"}};
      }};
  s["rules_differ"] = {[](int rank, const std::string&) {
                         set("MCR_RULES", rank == 0 ? "all_reduce:*=mpi" : "all_reduce:*=gloo");
                       },
                       [](int) {
                         return Expect{"MismatchError",
                                       {"selection rules", "rank 0 has 'all_reduce:*=mpi'",
                                        "rank 1 has 'all_reduce:*=gloo'"}};
                       }};
  // Only rank 1's input is bad: it raises its own error, and rank 0 raises too, naming rank 1,
  // instead of waiting for it.
  s["invalid_on_one_rank"] = {
      [](int rank, const std::string&) {
        if (rank == 1) set("MCR_TIMEOUT", "inf");
      },
      [](int rank) {
        if (rank == 1) return Expect{"InvalidArgument", {"MCR_TIMEOUT='inf'", "not finite"}};
        return Expect{"InvalidArgument", {"rank 1", "rejected", "MCR_TIMEOUT='inf'"}};
      }};
  // MCR_HIER (docs/hier-backend.md): a value naming no flat backend is refused on every rank; a
  // setting that differs between ranks is a MismatchError naming both values.
  s["hier_invalid"] = {
      [](int, const std::string&) { set("MCR_HIER", "intra=mpi;inter=hier"); },
      [](int) {
        return Expect{"InvalidArgument",
                      {"MCR_HIER='intra=mpi;inter=hier'", "inter=hier names no flat backend"}};
      }};
  s["hier_differs"] = {
      [](int rank, const std::string&) { set("MCR_HIER", rank == 0 ? "inter=gloo" : "inter=mpi"); },
      [](int) {
        return Expect{"MismatchError",
                      {"MCR_HIER", "rank 0 has 'intra=auto;inter=gloo'",
                       "rank 1 has 'intra=auto;inter=mpi'"}};
      }};
  // MCR_LOG on one rank only: finalize() would gather the log over the world there and leave the
  // other rank waiting for its timeout; init() refuses it on both. A mode the log lacks, on one
  // rank: refused with the other inputs, so both raise at init().
  s["log_on_one_rank"] = {[](int rank, const std::string&) {
                            if (rank == 0) set("MCR_LOG", "summary");
                          },
                          [](int) {
                            return Expect{
                                "MismatchError",
                                {"communication log (MCR_LOG) differs", "rank 0 has 'summary'",
                                 "rank 1 has '(unset)'", "MCR_LOG on every rank or none"}};
                          }};
  s["log_invalid_on_one_rank"] = {
      [](int rank, const std::string&) {
        if (rank == 1) set("MCR_LOG", "summary,trcae");
      },
      [](int rank) {
        if (rank == 1) {
          return Expect{"InvalidArgument", {"MCR_LOG='summary,trcae'", "unknown mode 'trcae'"}};
        }
        return Expect{"InvalidArgument", {"rank 1", "rejected", "MCR_LOG='summary,trcae'"}};
      }};
  // MCR_LOG's trace file in a directory that does not exist on one rank (a node without the
  // shared folder): refused at init() with the other inputs, not found at finalize() with the
  // records lost.
  s["log_file_unwritable_on_one_rank"] = {
      [](int rank, const std::string& dir) {
        set("MCR_LOG", "trace");
        set("MCR_TRACE_FILE", rank == 1 ? "/nonexistent-mcr-dir/trace.json" : dir + "/trace.json");
      },
      [](int rank) {
        if (rank == 1) {
          return Expect{"InvalidArgument",
                        {"MCR_TRACE_FILE='/nonexistent-mcr-dir/trace.json'",
                         "directory '/nonexistent-mcr-dir' does not exist"}};
        }
        return Expect{"InvalidArgument", {"rank 1", "rejected", "MCR_TRACE_FILE"}};
      }};
  // Gloo's own inputs (MCR_GLOO_THREADS, MCR_GLOO_IFACE) bad on one rank: read only inside Gloo's
  // bring-up, they raised there on that rank alone while the other waited in the bring-up until
  // its timeout; now they are rejected with the runtime's inputs, on every rank.
  s["gloo_threads_on_one_rank"] = {
      [](int rank, const std::string&) {
        if (rank == 1) set("MCR_GLOO_THREADS", "0");
      },
      [](int rank) {
        if (rank == 1) return Expect{"InvalidArgument", {"MCR_GLOO_THREADS='0'", "from 1 to 64"}};
        return Expect{"InvalidArgument", {"rank 1", "rejected", "MCR_GLOO_THREADS='0'"}};
      }};
  s["gloo_iface_on_one_rank"] = {
      [](int rank, const std::string&) {
        if (rank == 1) set("MCR_GLOO_IFACE", "nosuchif0");
      },
      [](int rank) {
        if (rank == 1) {
          return Expect{"InvalidArgument", {"MCR_GLOO_IFACE='nosuchif0'", "no such interface"}};
        }
        return Expect{"InvalidArgument", {"rank 1", "rejected", "MCR_GLOO_IFACE='nosuchif0'"}};
      }};
  // The flight recorder's inputs, read at the first communicator (after the backends' bring-up):
  // bad on one rank, they raised there alone while the other waited for the world's creation.
  s["flight_entries_on_one_rank"] = {
      [](int rank, const std::string&) {
        if (rank == 1) set("MCR_FLIGHT_ENTRIES", "0");
      },
      [](int rank) {
        if (rank == 1) return Expect{"InvalidArgument", {"MCR_FLIGHT_ENTRIES='0'", "from 1"}};
        return Expect{"InvalidArgument", {"rank 1", "rejected", "MCR_FLIGHT_ENTRIES='0'"}};
      }};
  s["flight_dir_on_one_rank"] = {
      [](int rank, const std::string&) {
        if (rank == 1) set("MCR_FLIGHT_DIR", "/dev/null/flight");
      },
      [](int rank) {
        if (rank == 1) return Expect{"InvalidArgument", {"MCR_FLIGHT_DIR='/dev/null/flight'"}};
        return Expect{"InvalidArgument", {"rank 1", "rejected", "MCR_FLIGHT_DIR"}};
      }};
  return s;
}

std::string type_of(const mcr::Error& e) {
  if (dynamic_cast<const mcr::MismatchError*>(&e) != nullptr) return "MismatchError";
  if (dynamic_cast<const mcr::InvalidArgument*>(&e) != nullptr) return "InvalidArgument";
  return "Error";
}

}  // namespace

int main(int argc, char** argv) {
  const char* rank_env = std::getenv("OMPI_COMM_WORLD_RANK");
  const int rank = rank_env != nullptr ? std::atoi(rank_env) : 0;
  const auto all = scenarios();
  if (argc < 3 || all.count(argv[1]) == 0) {
    fmt::print(stderr, "usage: {} SCENARIO DIR (scenarios:", argv[0]);
    for (const auto& [name, _] : all)
      fmt::print(stderr, " {}", name);
    fmt::print(stderr, ")\n");
    return 2;
  }
  const Scenario& sc = all.at(argv[1]);
  sc.setup(rank, argv[2]);
  const Expect want = sc.expect(rank);
  int code = 1;
  const auto start = Clock::now();
  try {
    mcr::init();
    fmt::print(stderr, "FAIL rank {}: init() succeeded; expected {}\n", rank, want.type);
  } catch (const mcr::Error& e) {
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    const std::string what = e.what();
    code = 0;
    if (type_of(e) != want.type) {
      fmt::print(stderr, "FAIL rank {}: {} instead of {}\n", rank, type_of(e), want.type);
      code = 1;
    }
    for (const auto& w : want.words) {
      if (what.find(w) == std::string::npos) {
        fmt::print(stderr, "FAIL rank {}: the message lacks \"{}\"\n", rank, w);
        code = 1;
      }
    }
    if (s > kBoundSeconds) {
      fmt::print(stderr, "FAIL rank {}: the error came after {:.2f} s (bound {} s)\n", rank, s,
                 kBoundSeconds);
      code = 1;
    }
    fmt::print("rank {}: {} after {:.3f} s: {}\n", rank, type_of(e), s, what);
  }
  // A failed init() leaves no runtime to use: not initialized, no runtime_info() (it read the
  // world that was never formed), and another init() raises, saying to finalize() first (it
  // returned an invalid world communicator).
  if (mcr::is_initialized()) {
    fmt::print(stderr, "FAIL rank {}: is_initialized() after a failed init()\n", rank);
    code = 1;
  }
  std::string info_error;
  try {
    (void)mcr::runtime_info();
    fmt::print(stderr, "FAIL rank {}: runtime_info() after a failed init()\n", rank);
    code = 1;
  } catch (const mcr::Error& e) {
    info_error = e.what();
  }
  if (info_error.find("init() failed") != std::string::npos) {  // the runtime was formed
    try {
      (void)mcr::init();
      fmt::print(stderr, "FAIL rank {}: init() again after a failed one returned\n", rank);
      code = 1;
    } catch (const mcr::Error& e) {
      if (std::string(e.what()).find("call mcr::finalize()") == std::string::npos) {
        fmt::print(stderr, "FAIL rank {}: init() again: {}\n", rank, e.what());
        code = 1;
      }
    }
  }
  mcr::finalize();
  return code;
}
