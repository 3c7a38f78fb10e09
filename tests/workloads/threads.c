/* Workload for end-to-end tests: 4 threads, each burning CPU through
 * worker -> stage_a -> stage_b -> stage_c -> leaf. Runs for argv[1] seconds. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "workload.h"

static volatile uint64_t sink;
static double end_time;

__attribute__((noinline)) void leaf(void) {
  uint64_t x = sink;
  x = churn(x);
  sink = x;
}
__attribute__((noinline)) void stage_c(void) { leaf(); __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) void stage_b(void) { stage_c(); __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) void stage_a(void) { stage_b(); __asm__ volatile("" ::: "memory"); }

__attribute__((noinline)) void *worker(void *arg) {
  (void)arg;
  while (now_seconds() < end_time) stage_a();
  return NULL;
}

int main(int argc, char **argv) {
  end_time = now_seconds() + (argc > 1 ? atof(argv[1]) : 10);
  pthread_t threads[4];
  for (int i = 0; i < 4; i++) pthread_create(&threads[i], NULL, worker, NULL);
  for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
  return 0;
}
