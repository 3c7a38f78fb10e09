/* The shared-library link of chain_shared: calls back into the executable. */
void stage_c(void);
__attribute__((noinline)) void stage_b(void) { stage_c(); __asm__ volatile("" ::: "memory"); }
