#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int c, char** v) {
  int pr;
  MPI_Init_thread(&c, &v, MPI_THREAD_FUNNELED, &pr);
  int r, p;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  size_t total = atol(v[1]) / 4;
  size_t n = total / p;
  float *in = malloc(total * 4), *out = malloc(n * 4), *tmp = malloc(total * 4);
  for (size_t i = 0; i < total; i++)
    in[i] = 1.0f;
  int counts[64];
  for (int i = 0; i < p; i++)
    counts[i] = n;
  for (int k = 0; k < 4; k++) {
    double t0, t1;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int i = 0; i < 5; i++)
      MPI_Reduce_scatter_block(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    t1 = MPI_Wtime();
    if (!r) printf("rsb %.2f ms\n", (t1 - t0) / 5 * 1e3);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int i = 0; i < 5; i++)
      MPI_Reduce_scatter(in, out, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    t1 = MPI_Wtime();
    if (!r) printf("rs  %.2f ms\n", (t1 - t0) / 5 * 1e3);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int i = 0; i < 5; i++)
      MPI_Allreduce(in, tmp, total, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    t1 = MPI_Wtime();
    if (!r) printf("ar  %.2f ms\n", (t1 - t0) / 5 * 1e3);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int i = 0; i < 5; i++)
      MPI_Reduce_local(in, tmp, total, MPI_FLOAT, MPI_SUM);
    t1 = MPI_Wtime();
    if (!r) printf("rl  %.2f ms\n", (t1 - t0) / 5 * 1e3);
  }
  MPI_Finalize();
}
