/* What pyperf's BPF program (pyperf.bpf.c) and the plugin's user space
 * (python_plugin.cpp) share besides the offsets (python_offsets.h): the
 * per-process data the plugin hands the walk, its counters, its private
 * maps' keys and its sample label. */
#ifndef OMNIPROF_PYPERF_H
#define OMNIPROF_PYPERF_H

#include "omniprof/bpf/abi.h"

/* process_info.interpreter_data, written by detect_process. */
enum pyperf_process_data {
  PYPERF_DATA_VERSION = 0,      /* index into python_offsets */
  PYPERF_DATA_INTERP_HEAD = 1,  /* address of the pointer to the first interpreter
                                 * (&_PyRuntime.interpreters.head, 3.7+; &interp_head, 2.7 and 3.6) */
  PYPERF_DATA_GIL_A = 2,        /* GIL_CURRENT_TSTATE: &_PyThreadState_Current;
                                 * GIL_STATIC: &gil.locked; else 0 */
  PYPERF_DATA_GIL_B = 3,        /* GIL_STATIC: &gil.last_holder; else 0 */
};

/* Counters in pyperf's percpu_stats range, in the order of kStatNames. */
enum pyperf_stat {
  PYPERF_STAT_SAMPLES = OMNIPROF_STATS_BASE(OMNIPROF_SLOT_PYTHON), /* walks started */
  PYPERF_STAT_FRAMES,             /* Python frames pushed */
  PYPERF_STAT_NO_OFFSETS,         /* the process's version has no offsets loaded */
  PYPERF_STAT_NO_THREAD_STATE,    /* the sampled thread has no Python thread state (a C thread) */
  PYPERF_STAT_READ_FAILED,        /* interpreter memory unreadable: the walk ended there */
  PYPERF_STAT_TRUNCATED,          /* frames left when the walk's budget ran out */
  PYPERF_STAT_GIL_HELD,           /* samples labelled python_gil=held */
  PYPERF_STAT_GIL_RELEASED,       /* samples labelled python_gil=released */
  PYPERF_STAT_CODE_SEEN_FULL,     /* python_code_seen full: a code object named late (if at all) */
  PYPERF_STAT_END
};

/* python_code_seen (and _fresh, what the plugin has not taken yet:
 * OMNIPROF_SEEN_MAP): the code objects the walk met, for the plugin's tick
 * to read while the process lives (so a process that exits in the round
 * keeps its frames' names). */
struct pyperf_code_key {
  omniprof_u32 pid;
  omniprof_u32 reserved;
  omniprof_u64 code;
};
#define PYPERF_CODE_SEEN_ENTRIES 4096 /* drained by tick: at once when new (OMNIPROF_TICK_ON_NOTICE_ONLY) */

/* A Python frame's code value (its omniprof_frame address and the seen
 * map's key): the code object's address in the low 48 bits (user space
 * addresses on x86-64 and arm64 without 5-level opt-in) and, in the top 16,
 * a tag of the code object's co_filename and co_name pointers. A code object
 * freed and another allocated at its address (a module's <module> after its
 * import, then a function of the script) give different tags, so the plugin
 * never names one by the other: its cache is keyed by the whole value, and a
 * code object read later whose tag differs from the sample's is no longer
 * the one sampled. Tag 0: not read (the frame is named by its address). */
#define PYPERF_CODE_TAG_SHIFT 48
#define PYPERF_CODE_ADDRESS_MASK ((1ULL << PYPERF_CODE_TAG_SHIFT) - 1)

static inline omniprof_u64 pyperf_code_tag(omniprof_u64 filename, omniprof_u64 name) {
  omniprof_u64 mixed = (filename ^ (name * 0x9e3779b97f4a7c15ULL)) * 0xff51afd7ed558ccdULL;
  omniprof_u64 tag = mixed >> PYPERF_CODE_TAG_SHIFT;
  return tag ? tag : 1;
}

/* python_thread_states: (pid << 32 | tid) -> the thread's PyThreadState
 * address, so a thread's state is searched for once, not per sample. */
#define PYPERF_THREAD_STATE_ENTRIES 4096
/* Thread states looked at per search of an interpreter's list. */
#define PYPERF_MAX_THREADS 64

/* The sample label (omniprof_plugin.label_values). */
enum pyperf_gil_label {
  PYPERF_GIL_HELD = 1,
  PYPERF_GIL_RELEASED = 2,
};

#endif /* OMNIPROF_PYPERF_H */
