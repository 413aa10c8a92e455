// Two ranks: MPI_Allreduce against an allreduce through an MPI-3 shared window ordered
// by per-rank counters (the scheme of csrc/backends/mpi/shm_allreduce.cc at 2 ranks).
//   mpicc -O3 -o /tmp/shm_vs_mpi benchmarks/shm_vs_mpi.c && mpirun -np 2 --bind-to core
//   /tmp/shm_vs_mpi
#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
int cmp(const void* a, const void* b) {
  double x = *(double*)a, y = *(double*)b;
  return x < y ? -1 : x > y;
}
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int r, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  long maxb = 4 << 20;
  MPI_Win win;
  char* base;
  MPI_Win_allocate_shared(2 * maxb + 64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  MPI_Aint sz;
  int du;
  char* peerbase;
  MPI_Win_shared_query(win, 1 - r, &sz, &du, &peerbase);
  MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
  int sizes[] = {4, 1024, 65536, 262144, 1048576, 4194304};
  int iters = 2000;
  double* t = malloc(sizeof(double) * iters);
  for (int si = 0; si < 6; si++) {
    long b = sizes[si];
    long cnt = b / 4;
    float* in = malloc(b);
    float* out = malloc(b);
    for (long i = 0; i < cnt; i++) in[i] = i * 0.5f + r;
    int its = b >= 1048576 ? 300 : iters;
    // MPI
    for (int rep = 0; rep < 2; rep++) {
      MPI_Barrier(MPI_COMM_WORLD);
      for (int i = 0; i < its; i++) {
        double a = now();
        MPI_Allreduce(in, out, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        t[i] = now() - a;
      }
      qsort(t, its, 8, cmp);
      double mpi = t[its / 2];
      // shm: seq flag at end of slot region; 2 halves
      MPI_Barrier(MPI_COMM_WORLD);
      volatile long* myflag = (long*)(base + 2 * maxb);
      volatile long* pflag = (long*)(peerbase + 2 * maxb);
      long seq0 = *myflag;
      MPI_Barrier(MPI_COMM_WORLD);
      for (int i = 0; i < its; i++) {
        double a = now();
        long seq = seq0 + i + 1;
        int h = seq & 1;
        memcpy(base + h * maxb, in, b);
        atomic_thread_fence(memory_order_release);
        *myflag = seq;
        while (*pflag < seq) {
        }
        atomic_thread_fence(memory_order_acquire);
        float* s0 = (float*)((r == 0 ? base : peerbase) + h * maxb);
        float* s1 = (float*)((r == 1 ? base : peerbase) + h * maxb);
        // use own input for own term
        const float* a0 = r == 0 ? in : s0;
        const float* a1 = r == 1 ? in : s1;
        for (long k = 0; k < cnt; k++) out[k] = a0[k] + a1[k];
        t[i] = now() - a;
      }
      qsort(t, its, 8, cmp);
      double shm = t[its / 2];
      if (r == 0)
        printf("%8ld B  MPI %8.2f us  shm %8.2f us  ratio %.2f\n", b, mpi, shm, mpi / shm);
    }
    free(in);
    free(out);
  }
  MPI_Win_unlock_all(win);
  MPI_Win_free(&win);
  MPI_Finalize();
}
