// LD_PRELOAD aid for the GPU machine, which has no gdb: on SIGSEGV, SIGBUS or SIGABRT it
// prints the faulting address, the thread's name and a native backtrace of the thread
// that faulted, then dies by the signal. Python's faulthandler shows only Python
// threads, and a crash on lockstep-bg or an NCCL thread shows no frame there.
//   gcc -shared -fPIC -O1 -o /tmp/segv_trace.so segv_trace.c -lpthread
//   mpirun ... -x LD_PRELOAD=/tmp/segv_trace.so python3 ... 2>&1 | python3 resolve_trace.py
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <unistd.h>

static void on_fault(int sig, siginfo_t* info, void* context) {
  (void)context;
  char name[32] = {0};
  prctl(PR_GET_NAME, name);
  char line[256];
  int n = snprintf(line, sizeof line, "\n*** segv_trace: signal %d at address %p in thread '%s' (tid %ld, pid %d)\n",
                   sig, info->si_addr, name, (long)syscall(SYS_gettid), getpid());
  write(2, line, n);
  void* frames[64];
  int count = backtrace(frames, 64);
  backtrace_symbols_fd(frames, count, 2);
  write(2, "*** segv_trace: end\n", 20);
  signal(sig, SIG_DFL);
  raise(sig);
}

static void install_handlers(void);

// MPI_Init and Python's faulthandler install their own handlers later: keep ours.
static void* keep_installed(void* unused) {
  (void)unused;
  for (;;) {
    struct sigaction current;
    sigaction(SIGSEGV, NULL, &current);
    if (current.sa_sigaction != on_fault) install_handlers();
    usleep(200000);
  }
  return NULL;
}

__attribute__((constructor)) static void install(void) {
  install_handlers();
  pthread_t thread;
  pthread_create(&thread, NULL, keep_installed, NULL);
  pthread_detach(thread);
}

static void install_handlers(void) {
  void* warm[2];
  backtrace(warm, 2);  // loads libgcc_s now, not inside the handler
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &action, NULL);
  sigaction(SIGBUS, &action, NULL);
  sigaction(SIGABRT, &action, NULL);
}
