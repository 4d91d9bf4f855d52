#include "backends/mpi/mpi_nbc.hpp"

#include <cstdlib>
#include <exception>

#include <fmt/format.h>

#include "mpi_check.hpp"

namespace mcr::detail {
namespace {

constexpr const char* kVariable = "coll_libnbc_iallreduce_algorithm";
constexpr const char* kEnvironment = "OMPI_MCA_coll_libnbc_iallreduce_algorithm";

struct Choice {
  bool decided = false;
  bool active = false;
  MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;
};

Choice& choice() {
  static Choice c;
  return c;
}

// Whether this process may choose: the library has the variable, as an integer at its default,
// and the user did not set it. Leaves c.handle allocated when it may.
bool may_choose(Choice& c) {
  const char* env = std::getenv(kEnvironment);
  if (env != nullptr) return false;  // the user's choice (also what `mpirun --mca` sets)
  // An MPI without the tools interface, or without the variable, keeps its own choice: this is a
  // speed-up, never a reason to fail.
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) return false;
  int index = -1;
  if (MPI_T_cvar_get_index(kVariable, &index) != MPI_SUCCESS) return false;  // not libnbc's MPI
  MPI_Datatype type = MPI_DATATYPE_NULL;
  int verbosity = 0, bind = 0, scope = 0;
  MCR_MPI_CHECK(MPI_T_cvar_get_info(index, nullptr, nullptr, &verbosity, &type, nullptr, nullptr,
                                    nullptr, &bind, &scope));
  if (type != MPI_INT || bind != MPI_T_BIND_NO_OBJECT || scope == MPI_T_SCOPE_CONSTANT ||
      scope == MPI_T_SCOPE_READONLY) {
    return false;
  }
  int count = 0;
  MCR_MPI_CHECK(MPI_T_cvar_handle_alloc(index, nullptr, &c.handle, &count));
  int value = -1;
  MCR_MPI_CHECK(MPI_T_cvar_read(c.handle, &value));
  if (count != 1 || value != kLibnbcOwnChoice) {  // set elsewhere (a parameter file)
    MCR_MPI_CHECK(MPI_T_cvar_handle_free(&c.handle));
    return false;
  }
  return true;
}

}  // namespace

void setup_libnbc_iallreduce_choice(MPI_Comm world) {
  Choice& c = choice();
  if (c.decided) return;
  int mine = 0;
  try {
    mine = may_choose(c) ? 1 : 0;
  } catch (const std::exception& e) {
    // Raising here would leave the other ranks in the MIN below; the library's own choice is
    // always correct, so this rank keeps it, and with it every rank.
    int rank = -1;
    if (MPI_Comm_rank(world, &rank) != MPI_SUCCESS) rank = -1;
    fmt::print(stderr, "mcr[{}]: libnbc keeps its own iallreduce algorithm: {}\n", rank, e.what());
  }
  // A rank that chose Rabenseifner's schedule and one that kept binomial would not match: only if
  // every rank may.
  int all = 0;
  MCR_MPI_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, world));
  if (mine == 1 && all == 0) MCR_MPI_CHECK(MPI_T_cvar_handle_free(&c.handle));
  c.active = all == 1;
  c.decided = true;
}

LibnbcIallreduceChoice::LibnbcIallreduceChoice(std::size_t bytes, bool in_place, int ranks) {
  Choice& c = choice();
  if (!c.active) return;
  int want = libnbc_iallreduce_algorithm_for(bytes, in_place, ranks);
  if (want == kLibnbcOwnChoice) return;  // already the value between calls
  MCR_MPI_CHECK(MPI_T_cvar_write(c.handle, &want));
  written_ = true;
}

void LibnbcIallreduceChoice::restore() {
  if (!written_) return;
  written_ = false;
  int own = kLibnbcOwnChoice;
  MCR_MPI_CHECK(MPI_T_cvar_write(choice().handle, &own));
}

LibnbcIallreduceChoice::~LibnbcIallreduceChoice() {
  if (!written_) return;
  int own = kLibnbcOwnChoice;
  (void)MPI_T_cvar_write(choice().handle, &own);  // after an exception: best effort, no throw
}

}  // namespace mcr::detail
