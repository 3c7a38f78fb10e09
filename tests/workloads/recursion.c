/* Workload for end-to-end tests: main -> recurse x DEPTH -> leaf, each
 * recurse frame holding ~600 bytes of locals, burning CPU in leaf(). Runs for
 * argv[1] seconds (default 10) at depth argv[2] (default 60). With
 * -fomit-frame-pointer only unwind tables can walk it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "workload.h"

static volatile uint64_t sink;

__attribute__((noinline)) void leaf(void) {
  uint64_t x = sink;
  x = churn(x);
  sink = x;
}

__attribute__((noinline)) void recurse(int depth) {
  volatile char frame[600];
  memset((char *)frame, depth, sizeof(frame));
  if (depth > 1) {
    recurse(depth - 1);
  } else {
    leaf();
  }
  sink += frame[depth % sizeof(frame)]; /* keeps the frame live: no tail call */
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 10;
  int depth = argc > 2 ? atoi(argv[2]) : 60;
  double end = now_seconds() + seconds;
  while (now_seconds() < end) recurse(depth);
  return 0;
}
