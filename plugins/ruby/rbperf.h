/* rbperf's BPF/user-space contract: the process data it is given, its
 * counters, how a Ruby frame is stored and the map it notes them in. */
#ifndef OMNIPROF_RBPERF_H
#define OMNIPROF_RBPERF_H

#include "omniprof/bpf/abi.h"

enum rbperf_process_data {
  RBPERF_DATA_VERSION = 0,  /* index into ruby_offsets */
  RBPERF_DATA_EC_MODEL = 1, /* enum ruby_ec_model */
  RBPERF_DATA_EC_A = 2,     /* per model (ruby_offsets.h) */
  RBPERF_DATA_EC_B = 3,
};

enum rbperf_stat {
  RBPERF_STAT_SAMPLES = OMNIPROF_STATS_BASE(OMNIPROF_SLOT_RUBY), /* walks started */
  RBPERF_STAT_FRAMES,        /* Ruby frames pushed */
  RBPERF_STAT_NO_OFFSETS,    /* the process's version has no offsets loaded */
  RBPERF_STAT_NO_EC,         /* the sampled thread has no execution context (a C thread) */
  RBPERF_STAT_READ_FAILED,   /* VM memory unreadable: an [unknown ruby] frame, the walk ended */
  RBPERF_STAT_TRUNCATED,     /* frames left when the walk's budget ran out */
  RBPERF_STAT_FRAMES_SEEN_FULL, /* ruby_frames_seen full: a frame named late (if at all) */
  RBPERF_STAT_EC_OF_ANOTHER_THREAD, /* 2.6 to 3.0.3: the global EC was another thread's (this one ran without the GVL) */
  RBPERF_STAT_END
};

/* A Ruby frame (struct omniprof_frame, kind OMNIPROF_FRAME_RUBY):
 * - an instruction sequence frame: address = the rb_iseq_t, detail = the
 *   pc as a VALUE index, (pc >> 3) & RBPERF_DETAIL_PC_MASK: the reader gets
 *   the index into the iseq's instructions as
 *   (detail - (iseq_encoded >> 3)) & RBPERF_DETAIL_PC_MASK (an iseq is far
 *   shorter than 2^29 VALUEs);
 * - a C function called from Ruby (VM_FRAME_MAGIC_CFUNC): address = its
 *   rb_callable_method_entry_t, detail = RBPERF_DETAIL_CFUNC;
 * - a frame that could not be read: address 0 ("[unknown ruby]"). */
#define RBPERF_DETAIL_CFUNC 0x80000000u
#define RBPERF_DETAIL_PC_MASK 0x1fffffffu

/* ruby_frames_seen (and _fresh, what the plugin has not taken yet:
 * OMNIPROF_SEEN_MAP): each (process, address) the walk pushed, for the plugin
 * to read while the process lives (its tick drains _fresh). The value is
 * the frame's method entry: for an iseq frame the one its local
 * environment holds (names the class: `Foo#bar`, `block in Foo#bar`), 0 if
 * none; for a C function frame the address itself. */
struct rbperf_frame_key {
  omniprof_u32 pid;
  omniprof_u32 reserved;
  omniprof_u64 address;
};
#define RBPERF_FRAMES_SEEN_ENTRIES 4096 /* drained by tick: at once when new (OMNIPROF_TICK_ON_NOTICE_ONLY) */

#endif /* OMNIPROF_RBPERF_H */
