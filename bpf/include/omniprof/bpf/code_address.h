/* The address of the code a stack frame was running, from the address the
 * walk found there. The sampled frame's address is exact; every other frame's
 * is a return address, which points after its call, and the call may be the
 * last instruction of its function: the code that ran is the byte before.
 * One rule for the BPF walkers (which pick the unwind row and the interpreter
 * range with it), the plugins and the host (which name the frame with it). */
#ifndef OMNIPROF_BPF_CODE_ADDRESS_H
#define OMNIPROF_BPF_CODE_ADDRESS_H

#include "omniprof/bpf/abi.h"

static inline __attribute__((always_inline)) omniprof_u64 omniprof_code_address(omniprof_u64 address,
                                                                                int is_return_address) {
  return is_return_address ? address - 1 : address;
}

#endif /* OMNIPROF_BPF_CODE_ADDRESS_H */
