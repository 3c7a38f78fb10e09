/* Workload for the end-to-end test of unnamed native code grouped by
 * function (tests/e2e/function_start_names_test.cpp): seven functions, each
 * burning CPU over many distinct instructions, called in turn by main for
 * about the same time each. Built -O2 -fomit-frame-pointer and stripped (no
 * .symtab, nothing exported: only .eh_frame knows where the functions are);
 * an unstripped copy is the test's oracle. Runs for argv[1] seconds
 * (default 10). The bodies differ so that -fipa-icf cannot fold two into
 * one; noinline keeps each a function of its own, and none calls a libgcc
 * helper (__popcountdi2 would be an eighth unnamed function). */
#include <stdint.h>
#include <stdlib.h>

#include "workload.h"

static volatile uint64_t sink;

#define SLICE_SECONDS 0.002

/* Each runs rounds of a loop until its slice of time is over; the loop is
 * unrolled so that its samples fall on many addresses (one row each, were
 * they not grouped by function). */
#define BURN_FUNCTION(name, body)                                   \
  __attribute__((noinline)) void name(double until) {              \
    uint64_t x = sink + 1;                                          \
    do {                                                            \
      _Pragma("GCC unroll 8")                                       \
      for (int i = 0; i < 20000; i++) { body; }                     \
      __asm__ volatile("" : "+r"(x));                               \
    } while (now_seconds() < until);                                \
    sink = x;                                                       \
  }

BURN_FUNCTION(burn_multiply, x = x * 6364136223846793005ULL + 1442695040888963407ULL)
BURN_FUNCTION(burn_xorshift, x ^= x << 13; x ^= x >> 7; x ^= x << 17)
BURN_FUNCTION(burn_rotate, x = (x << 11 | x >> 53) + 0x9e3779b97f4a7c15ULL)
BURN_FUNCTION(burn_divide, x = x / 3 + 0x1234567ULL + (uint64_t)i)
BURN_FUNCTION(burn_subtract, x = (x - (x >> 3)) ^ (0x5bd1e995ULL + (uint64_t)i))
BURN_FUNCTION(burn_branches, if (x & 1) x = x * 3 + 1; else x >>= 1; x += (uint64_t)i)
BURN_FUNCTION(burn_mix, x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ULL; x ^= (uint64_t)i << 3)

int main(int argc, char **argv) {
  void (*const functions[])(double) = {burn_multiply, burn_xorshift, burn_rotate, burn_divide,
                                       burn_subtract, burn_branches, burn_mix};
  double seconds = argc > 1 ? atof(argv[1]) : 10;
  double end = now_seconds() + seconds;
  while (now_seconds() < end) {
    for (unsigned i = 0; i < sizeof(functions) / sizeof(functions[0]); i++) {
      functions[i](now_seconds() + SLICE_SECONDS);
    }
  }
  return 0;
}
