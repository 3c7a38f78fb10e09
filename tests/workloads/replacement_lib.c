/* What the test renames over libreplaced_original.so while a process runs
 * it: other functions, padded so that they cover every address where the
 * original's functions were. Reading this file for the running process
 * would name its samples pad_fn_a and unwind them with the wrong table. */
#include <stdint.h>

static volatile uint64_t sink;

#define PAD_FUNCTION(name)                           \
  __attribute__((noinline)) void name(void) {        \
    sink = sink + 1;                                 \
    __asm__ volatile(".skip 8192, 0x90" ::: "memory"); \
  }

PAD_FUNCTION(pad_fn_a)
PAD_FUNCTION(pad_fn_b)
PAD_FUNCTION(rl_stage_is_not_here)
