// Starts N copies of a program the way torchrun does, without any MPI launcher: each gets RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and a free MASTER_PORT, and no
// MPI/PMIx/Slurm variables. Waits for all of them with a timeout; fails if any fails or hangs.
//
//   torchrun_launch --nproc N [--timeout SECONDS] -- PROGRAM [ARGS...]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

extern char** environ;

namespace {

int usage(const char* why) {
  std::fprintf(stderr,
               "torchrun_launch: %s\nusage: torchrun_launch --nproc N [--timeout SECONDS] -- "
               "PROGRAM [ARGS...]\n",
               why);
  return 2;
}

// A port nobody listens on right now: bind to port 0 and read back what the kernel chose.
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// Variables of MPI launchers and resource managers: with them the program would think mpirun or
// srun started it.
bool is_launcher_variable(std::string_view entry) {
  for (std::string_view prefix :
       {"OMPI_", "PMIX_", "PMI_", "SLURM_", "OPAL_", "PRTE_", "HYDRA_", "MPI_LOCALRANKID", "MV2_",
        "MVP_", "RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE=", "MASTER_ADDR=",
        "MASTER_PORT="}) {
    if (entry.starts_with(prefix)) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  int nproc = 0;
  int timeout_s = 300;
  int first = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--") {
      first = i + 1;
      break;
    }
    if (a == "--nproc" && i + 1 < argc) {
      nproc = std::atoi(argv[++i]);
    } else if (a == "--timeout" && i + 1 < argc) {
      timeout_s = std::atoi(argv[++i]);
    } else {
      return usage("unknown argument");
    }
  }
  if (nproc < 1) return usage("--nproc must be a positive number of processes");
  if (timeout_s < 1) return usage("--timeout must be a positive number of seconds");
  if (first < 0 || first >= argc) return usage("no program given after --");

  const int port = free_port();
  if (port < 0) {
    std::perror("torchrun_launch: cannot find a free port");
    return 2;
  }
  std::vector<std::string> base_env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!is_launcher_variable(*e)) base_env.emplace_back(*e);
  }
  std::fprintf(stderr, "torchrun_launch: %d processes, MASTER_ADDR=127.0.0.1 MASTER_PORT=%d\n",
               nproc, port);

  std::vector<pid_t> pids;
  for (int rank = 0; rank < nproc; ++rank) {
    std::vector<std::string> env = base_env;
    env.push_back("RANK=" + std::to_string(rank));
    env.push_back("WORLD_SIZE=" + std::to_string(nproc));
    env.push_back("LOCAL_RANK=" + std::to_string(rank));
    env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(nproc));
    env.emplace_back("MASTER_ADDR=127.0.0.1");
    env.push_back("MASTER_PORT=" + std::to_string(port));
    std::vector<char*> envp;
    for (auto& s : env)
      envp.push_back(s.data());
    envp.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("torchrun_launch: fork");
      for (pid_t p : pids)
        kill(p, SIGKILL);
      return 2;
    }
    if (pid == 0) {
      execve(argv[first], argv + first, envp.data());
      std::fprintf(stderr, "torchrun_launch: cannot run %s: %s\n", argv[first],
                   std::strerror(errno));
      _exit(127);
    }
    pids.push_back(pid);
  }

  // Wait for every rank. Once one fails, the others get a grace period to fail on their own
  // (their timeouts name the stalled operation) before they are killed.
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  std::vector<int> status(pids.size(), -1);
  std::size_t running = pids.size();
  bool failed = false;
  while (running > 0) {
    int ws = 0;
    const pid_t pid = waitpid(-1, &ws, WNOHANG);
    if (pid > 0) {
      for (std::size_t r = 0; r < pids.size(); ++r) {
        if (pids[r] != pid) continue;
        status[r] = ws;
        --running;
        const bool ok = WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
        if (!ok) {
          if (WIFSIGNALED(ws)) {
            std::fprintf(stderr, "torchrun_launch: rank %zu killed by signal %d\n", r,
                         WTERMSIG(ws));
          } else {
            std::fprintf(stderr, "torchrun_launch: rank %zu exited with status %d\n", r,
                         WEXITSTATUS(ws));
          }
          if (!failed) deadline = std::min(deadline, Clock::now() + std::chrono::seconds(90));
          failed = true;
        }
      }
      continue;
    }
    if (Clock::now() > deadline) {
      for (std::size_t r = 0; r < pids.size(); ++r) {
        if (status[r] == -1) {
          std::fprintf(stderr,
                       "torchrun_launch: rank %zu still running at the deadline; killing it\n", r);
          kill(pids[r], SIGKILL);
        }
      }
      while (waitpid(-1, nullptr, 0) > 0) {
      }
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!failed) std::fprintf(stderr, "torchrun_launch: all %d ranks exited with status 0\n", nproc);
  return failed ? 1 : 0;
}
