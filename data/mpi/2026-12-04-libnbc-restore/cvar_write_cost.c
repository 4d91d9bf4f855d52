// The cost of one MPI_T_cvar_write of libnbc's coll_libnbc_iallreduce_algorithm, which mcr makes
// twice around each nonblocking all_reduce of 64 KiB or more (src/comm/backends/mpi/mpi_nbc.hpp):
// 10^6 writes alternating 3 and 0, one process. Every MPI call is checked.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static void check(int rc, const char* call) {
  if (rc != MPI_SUCCESS) {
    fprintf(stderr, "%s failed (%d)\n", call, rc);
    exit(1);
  }
}

int main(int argc, char** argv) {
  int provided = 0, index = -1, count = 0;
  MPI_T_cvar_handle handle;
  check(MPI_Init(&argc, &argv), "MPI_Init");
  check(MPI_T_init_thread(MPI_THREAD_SERIALIZED, &provided), "MPI_T_init_thread");
  check(MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index), "MPI_T_cvar_get_index");
  check(MPI_T_cvar_handle_alloc(index, NULL, &handle, &count), "MPI_T_cvar_handle_alloc");
  const int n = 1000000;
  for (int round = 0; round < 3; ++round) {
    const double start = MPI_Wtime();
    for (int i = 0; i < n; ++i) {
      int value = (i & 1) ? 3 : 0;
      check(MPI_T_cvar_write(handle, &value), "MPI_T_cvar_write");
    }
    printf("round %d: %.1f ns per write\n", round + 1, (MPI_Wtime() - start) * 1e9 / n);
  }
  check(MPI_T_cvar_handle_free(&handle), "MPI_T_cvar_handle_free");
  check(MPI_T_finalize(), "MPI_T_finalize");
  check(MPI_Finalize(), "MPI_Finalize");
  return 0;
}
