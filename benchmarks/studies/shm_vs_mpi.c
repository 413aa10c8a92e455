// Two ranks, float32 Sum in 1 MiB chunks: MPI_Allreduce against two ways of reducing
// through an MPI-3 shared window ordered by per-rank counters, as
// csrc/backends/mpi/shm_allreduce.cc does:
//   one pass: each rank copies its whole chunk in, waits for the other, and reduces the
//             whole chunk itself (one wait);
//   split:    each rank copies in the half the other reduces, reduces its own half,
//             publishes it, and copies the other's reduced half out (two waits, less data).
// Medians of rank 0's times over 40 repetitions, a barrier before each.
//   mpicc -O3 -o /tmp/shm_vs_mpi benchmarks/studies/shm_vs_mpi.c
//   mpirun -np 2 --bind-to core /tmp/shm_vs_mpi
#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kChunk = 1 << 20, kHeader = 256 };

static int rank;
static char *mine, *theirs;  // each rank's counters (two, 128 bytes apart), then 2 slots
static long run;

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void Raise(int which) {
  atomic_store_explicit((_Atomic long*)(mine + 128 * which), run, memory_order_release);
}

static void WaitFor(int which) {
  while (atomic_load_explicit((_Atomic long*)(theirs + 128 * which), memory_order_acquire) < run) {
    __builtin_ia32_pause();
  }
}

static float* Slot(char* base) { return (float*)(base + kHeader + (run & 1) * kChunk); }

static void OnePass(const float* in, float* out, long n) {
  ++run;
  memcpy(Slot(mine), in, n * 4);
  Raise(0);
  WaitFor(0);
  const float* first = rank == 0 ? in : Slot(theirs);
  const float* second = rank == 0 ? Slot(theirs) : in;
  for (long i = 0; i < n; ++i) out[i] = first[i] + second[i];
}

static void Split(const float* in, float* out, long n) {
  ++run;
  const long half = n / 2;
  const long my_lo = rank == 0 ? 0 : half, my_n = rank == 0 ? half : n - half;
  const long their_lo = rank == 0 ? half : 0, their_n = n - my_n;
  memcpy(Slot(mine) + their_lo, in + their_lo, their_n * 4);
  Raise(0);
  WaitFor(0);
  const float* other = Slot(theirs);
  for (long i = my_lo; i < my_lo + my_n; ++i) {
    const float v = rank == 0 ? in[i] + other[i] : other[i] + in[i];
    out[i] = v;
    Slot(mine)[i] = v;
  }
  Raise(1);
  WaitFor(1);
  memcpy(out + their_lo, Slot(theirs) + their_lo, their_n * 4);
}

static int Compare(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Win window;
  MPI_Win_allocate_shared(kHeader + 2 * kChunk, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mine, &window);
  MPI_Aint bytes;
  int unit;
  MPI_Win_shared_query(window, 1 - rank, &bytes, &unit, &theirs);
  memset(mine, 0, kHeader);
  MPI_Barrier(MPI_COMM_WORLD);

  const long sizes[] = {16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
  const char* names[] = {"MPI_Allreduce", "one pass", "split"};
  for (int s = 0; s < (int)(sizeof(sizes) / sizeof(sizes[0])); ++s) {
    const long n = sizes[s] / 4;
    float* in = malloc(sizes[s]);
    float* out = malloc(sizes[s]);
    for (long i = 0; i < n; ++i) in[i] = i * 0.25f + rank, out[i] = 0;
    enum { kReps = 40 };
    double times[3][kReps];
    for (int rep = 0; rep < kReps; ++rep) {
      for (int way = 0; way < 3; ++way) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double start = Now();
        for (long at = 0; at < n; at += kChunk / 4) {
          const long count = n - at < kChunk / 4 ? n - at : kChunk / 4;
          if (way == 0) {
            MPI_Allreduce(in + at, out + at, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
          } else if (way == 1) {
            OnePass(in + at, out + at, count);
          } else {
            Split(in + at, out + at, count);
          }
        }
        times[way][rep] = Now() - start;
      }
    }
    if (rank == 0) {
      printf("%6ld KiB:", sizes[s] >> 10);
      for (int way = 0; way < 3; ++way) {
        qsort(times[way], kReps, sizeof(double), Compare);
        printf("  %s %9.1f us", names[way], times[way][kReps / 2]);
      }
      printf("\n");
    }
    free(in);
    free(out);
  }
  MPI_Win_free(&window);
  MPI_Finalize();
  return 0;
}
