/* Workload of the short-lived process tests (tests/e2e/early_samples_test.cpp):
 * burns CPU_MS milliseconds of its own CPU time in short_lived_spin, always
 * reached through main -> short_lived_outer -> short_lived_middle ->
 * short_lived_spin, with its thread named "short_lived_hot" meanwhile, then
 * exits. Built -O2 -fomit-frame-pointer: only unwind tables walk it.
 *
 *   short_lived_nofp CPU_MS
 *       once, then exit: what the test's shell loop starts 100 times.
 *   short_lived_nofp CPU_MS ROUNDS PAUSE_MS GO_FILE
 *       the long-lived control: waits for GO_FILE to exist (at most 120 s),
 *       then ROUNDS times burns CPU_MS the same way and sleeps PAUSE_MS.
 *   short_lived_nofp CPU_MS fork CHILDREN GO_FILE
 *       waits for GO_FILE as the control does, then forks CHILDREN children
 *       one after another, none of which execs: each burns CPU_MS the same
 *       way (its chain from the fork's return in main) and exits; the
 *       parent only waits for them.
 *   short_lived_nofp CPU_MS exec NAME GO_FILE
 *       waits for GO_FILE as the control does, then burns CPU_MS the same
 *       way with its thread named NAME, and execs itself as
 *       `short_lived_nofp CPU_MS`: the same chain in a new image of the
 *       same file, mapped elsewhere (PIE), under the same process name.
 *
 * The thread name tells the test which samples were taken while the chain
 * ran: BPF reads it from the kernel at each sample (the label thread_name),
 * whatever the profiler knows of the process. noinline keeps every link a
 * real frame at -O2, and the empty asm after each call keeps it a call, not
 * a jump. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "workload.h"

static volatile uint64_t sink;

__attribute__((noinline)) void short_lived_spin(double until) {
  uint64_t x = sink;
  while (thread_cpu_seconds() < until) x = churn(x);
  sink = x;
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void short_lived_middle(double until) {
  short_lived_spin(until);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void short_lived_outer(double until) {
  short_lived_middle(until);
  __asm__ volatile("" ::: "memory");
}

/* Waits for GO to exist; 0 once it does. A test that died must not leave
 * this waiting forever: 1 after 120 s. */
static int wait_for(const char *go) {
  for (int i = 0; access(go, F_OK) != 0; i++) {
    if (i == 2400) {
      fprintf(stderr, "%s never appeared\n", go);
      return 1;
    }
    usleep(50000);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2 && argc != 5) {
    fprintf(stderr, "usage: %s CPU_MS [ROUNDS PAUSE_MS GO_FILE | fork CHILDREN GO_FILE | exec NAME GO_FILE]\n",
            argv[0]);
    return 2;
  }
  double seconds = atof(argv[1]) / 1000;
  if (argc == 5 && strcmp(argv[2], "exec") == 0) {
    if (wait_for(argv[4]) != 0) return 1;
    prctl(PR_SET_NAME, argv[3]);
    short_lived_outer(thread_cpu_seconds() + seconds);
    char *again[] = {argv[0], argv[1], NULL};
    execv("/proc/self/exe", again);
    perror("execv");
    return 1;
  }
  if (argc == 5 && strcmp(argv[2], "fork") == 0) {
    if (wait_for(argv[4]) != 0) return 1;
    for (int i = 0, children = atoi(argv[3]); i < children; i++) {
      pid_t child = fork();
      if (child < 0) {
        perror("fork");
        return 1;
      }
      if (child == 0) {
        prctl(PR_SET_NAME, "short_lived_hot");
        short_lived_outer(thread_cpu_seconds() + seconds);
        prctl(PR_SET_NAME, "short_lived_end");
        _exit(0);
      }
      int status = 0;
      if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
    }
    return 0;
  }
  int rounds = 1;
  if (argc == 5) {
    rounds = atoi(argv[2]);
    if (wait_for(argv[4]) != 0) return 1;
  }
  for (int round = 0; round < rounds; round++) {
    if (round > 0) usleep((useconds_t)atoi(argv[3]) * 1000);
    prctl(PR_SET_NAME, "short_lived_hot");
    short_lived_outer(thread_cpu_seconds() + seconds);
    prctl(PR_SET_NAME, "short_lived_end");
  }
  __asm__ volatile("" ::: "memory");
  return 0;
}
