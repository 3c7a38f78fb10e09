/* The ABI between omniprof's BPF programs and its host, included by every BPF
 * object (host entry, in-tree and third-party unwinders) and by C++.
 *
 * Changing a layout here changes OMNIPROF_BPF_ABI_VERSION: a plugin whose BPF
 * object was built against another layout is refused by the host before load,
 * because its programs would read the shared maps with the wrong offsets.
 */
#ifndef OMNIPROF_BPF_ABI_H
#define OMNIPROF_BPF_ABI_H

#ifdef __bpf__
#include <linux/types.h>
typedef __u8 omniprof_u8;
typedef __u16 omniprof_u16;
typedef __u32 omniprof_u32;
typedef __u64 omniprof_u64;
#else
#include <stdint.h>
typedef uint8_t omniprof_u8;
typedef uint16_t omniprof_u16;
typedef uint32_t omniprof_u32;
typedef uint64_t omniprof_u64;
#endif
#ifdef __bpf__
typedef __s32 omniprof_s32;
#else
typedef int32_t omniprof_s32;
#endif

#define OMNIPROF_BPF_ABI_VERSION 5

/* ---- Tail-call slots -------------------------------------------------------
 * One PROG_ARRAY ("programs") owned by the host. Every unwinder finishes by
 * tail-calling STOP, which stores the stack and counts the sample, so no
 * unwinder carries its own copy of the aggregation code. */
enum omniprof_slot {
  OMNIPROF_SLOT_STOP = 0,   /* host: store the stack, count the sample */
  OMNIPROF_SLOT_NATIVE = 1, /* native unwinder (plugins/native) */
  OMNIPROF_SLOT_RUBY = 2,   /* rbperf (plugins/ruby) */
  OMNIPROF_SLOT_PYTHON = 3, /* pyperf (plugins/python) */
  OMNIPROF_SLOT_THIRD_PARTY_FIRST = 4, /* assigned by the host at load time */
  OMNIPROF_NUM_SLOTS = 8
};

/* ---- Statistics (percpu_stats) ---------------------------------------------
 * One range of OMNIPROF_STATS_PER_SLOT counters per slot: the host's counters
 * live in the STOP range, each unwinder reports its stop reasons in its own
 * range, so a third-party plugin cannot collide with an in-tree one. */
#define OMNIPROF_STATS_PER_SLOT 32
#define OMNIPROF_NUM_STATS (OMNIPROF_NUM_SLOTS * OMNIPROF_STATS_PER_SLOT)
#define OMNIPROF_STATS_BASE(slot) ((slot) * OMNIPROF_STATS_PER_SLOT)

enum omniprof_host_stat {
  OMNIPROF_STAT_SAMPLES = 0,            /* entry program ran */
  OMNIPROF_STAT_IDLE = 1,               /* CPU idle (pid 0): not recorded, by design */
  OMNIPROF_STAT_FILTERED = 2,           /* process not selected with -p */
  OMNIPROF_STAT_RECORDED = 3,           /* sample counted in stack_counts */
  OMNIPROF_STAT_KERNEL_STACK_ERROR = 4, /* bpf_get_stack failed: sample kept without kernel frames */
  OMNIPROF_STAT_KERNEL_THREAD = 5,      /* no user stack to walk (kernel thread) */
  OMNIPROF_STAT_STACK_TRACES_FULL = 6,  /* stack not stored: kept as "[stack lost]" */
  OMNIPROF_STAT_STACK_COUNTS_FULL = 7,  /* sample dropped: stack_counts full */
  OMNIPROF_STAT_TAIL_CALL_FAILED = 8,   /* a slot was empty: walk ended early, sample kept */
  OMNIPROF_STAT_EVENTS_LOST = 9,        /* ring buffer full: a host notification was lost */
  OMNIPROF_STAT_PROCESS_REQUESTS = 10,  /* requests to the host (unknown process, stale mappings) */
  OMNIPROF_STAT_STATE_MISSING = 11,     /* per-CPU unwind state unavailable: sample dropped */
  OMNIPROF_STAT_TAIL_CALL_LIMIT = 12,   /* tail-call budget spent: stack truncated */
  OMNIPROF_STAT_STACK_TRUNCATED = 13,   /* OMNIPROF_MAX_STACK_DEPTH frames reached */
  OMNIPROF_STAT_USER_REGS_ERROR = 14,   /* user registers unreadable: kernel frames only */
  OMNIPROF_STAT_MARKS_FULL = 15,        /* more interpreter loop frames than marks: the rest unmarked */
  OMNIPROF_STAT_INTERPRETER_TRUNCATED = 16, /* interpreter frames past OMNIPROF_MAX_STACK_DEPTH dropped */
  OMNIPROF_STAT_SAMPLE_TIMES_LOST = 17, /* sample_times full: a sample counted without its time */
  OMNIPROF_STAT_USER_MEMORY_GONE = 18,  /* no user stack to walk: the process is exiting or exec'ing */
  OMNIPROF_STAT_FORK_COPY_FAILED = 19,  /* process_info full: a fork's child not given its parent's entry */
  /* What the maps were given, read every second to drain them before they fill
   * (host/agent/drain_schedule.h): */
  OMNIPROF_STAT_COUNT_KEYS_ADDED = 20,  /* new keys in stack_counts */
  OMNIPROF_STAT_FRAGMENTS_STORED = 21,  /* fragments written to stack_traces */
  OMNIPROF_NUM_HOST_STATS = 22
};

enum omniprof_native_stat {
  OMNIPROF_STAT_NATIVE_FRAMES = OMNIPROF_STATS_BASE(OMNIPROF_SLOT_NATIVE), /* frames walked */
  OMNIPROF_STAT_NATIVE_STOP_OUTERMOST,   /* reached the outermost frame (CFI or frame pointer 0) */
  OMNIPROF_STAT_NATIVE_STOP_READ_FAILED, /* stack memory unreadable (paged out, bad pointer) */
  OMNIPROF_STAT_NATIVE_STOP_ZERO_RETURN, /* return address 0 */
  OMNIPROF_STAT_NATIVE_STOP_FP_NOT_ASCENDING, /* next frame below the current one: corrupt chain */
  OMNIPROF_STAT_NATIVE_STOP_MAX_DEPTH,   /* stack buffer full */
  OMNIPROF_STAT_NATIVE_DWARF_FRAMES,     /* frames recovered from unwind tables */
  OMNIPROF_STAT_NATIVE_FP_FRAMES,        /* frames recovered from frame pointers (no table) */
  OMNIPROF_STAT_NATIVE_NO_MAPPING,       /* pc in no known executable mapping (JIT, unknown) */
  OMNIPROF_STAT_NATIVE_NO_TABLE,         /* executable has no unwind table loaded (yet) */
  OMNIPROF_STAT_NATIVE_NO_ROW,           /* pc outside every function of the table */
  OMNIPROF_STAT_NATIVE_UNSUPPORTED_RULE, /* CFA rule not evaluable in BPF: frame pointers tried */
  OMNIPROF_STAT_NATIVE_STOP_SP_NOT_ASCENDING, /* CFA below the stack pointer: corrupt unwind */
  OMNIPROF_STAT_NATIVE_NO_SHARD,         /* a chunk's shard is not in unwind_shards: frame pointers tried */
  /* Gauges written by the native plugin from user space (BPF never touches
   * them): what the unwind store holds now. */
  OMNIPROF_STAT_NATIVE_ROWS_STORED,      /* unwind rows stored, all executables */
  OMNIPROF_STAT_NATIVE_TABLES_STORED,    /* executables with a table stored */
  /* Walks that reached a file whose table the host was still building
   * (OMNIPROF_UNWIND_INFO_BUILDING): they went on by frame pointers, so they
   * may stop short. Counted once per walk. */
  OMNIPROF_STAT_NATIVE_WALKS_TABLE_BUILDING,
  OMNIPROF_STAT_NATIVE_END
};

/* ---- Stacks ----------------------------------------------------------------*/
/* Frames of one user stack, native and interpreter frames together. */
#define OMNIPROF_MAX_STACK_DEPTH 512
/* Frames of a kernel stack (the kernel's own PERF_MAX_STACK_DEPTH is 127). */
#define OMNIPROF_MAX_KERNEL_DEPTH 128
/* The kernel refuses the 33rd tail call of a chain (32 before 5.x). Unwinders
 * stop at this many and keep one for STOP. */
#define OMNIPROF_MAX_TAIL_CALLS 30
/* Tail calls the native walker leaves for the process's interpreter unwinder
 * (on kernels without bpf_loop, where the native walk needs many). */
#define OMNIPROF_INTERPRETER_TAIL_CALLS 6

/* Stack ids are 64-bit hashes of the frames; these two values are reserved. */
#define OMNIPROF_STACK_ID_NONE 0ULL /* no such stack (kernel thread, user-only sample) */
#define OMNIPROF_STACK_ID_LOST 1ULL /* the stack could not be stored (stack_traces full) */

/* Frame kinds: which reader names a frame. A frame an unwinder produces
 * carries that unwinder's slot (NATIVE, RUBY, PYTHON, or a third party's
 * 4 to 7); kernel frames carry OMNIPROF_FRAME_KERNEL. 0 is no frame. */
enum omniprof_frame_kind {
  OMNIPROF_FRAME_NATIVE = OMNIPROF_SLOT_NATIVE, /* instruction address, named from ELF */
  OMNIPROF_FRAME_RUBY = OMNIPROF_SLOT_RUBY,
  OMNIPROF_FRAME_PYTHON = OMNIPROF_SLOT_PYTHON,
  OMNIPROF_FRAME_KERNEL = OMNIPROF_NUM_SLOTS,   /* kernel instruction address */
};

/* One frame. A native or kernel frame is an instruction address; an
 * interpreter frame carries what its plugin's reader needs to name it and
 * its executing line (pyperf: the code object's address and the
 * instruction's offset). */
struct omniprof_frame {
  omniprof_u64 address;
  omniprof_u32 detail; /* interpreter frames: the plugin's (e.g. instruction offset); else 0 */
  omniprof_u8 kind;    /* enum omniprof_frame_kind */
  omniprof_u8 flags;   /* OMNIPROF_FRAME_SPLICED, OMNIPROF_FRAME_REPLACES_MARK */
  omniprof_u16 after;  /* spliced frames: how many unspliced frames precede it */
};

/* An interpreter frame stored after the native frames: it belongs right
 * after the first `after` unspliced (native) frames of the stack. The host
 * puts it there when it reads the stack (see omniprof_unwind_state). */
#define OMNIPROF_FRAME_SPLICED (1u << 0)
/* With OMNIPROF_FRAME_SPLICED: the frame takes the place of its mark (the
 * `after`-th native frame) instead of following it. For code the native
 * walker can step through but not name, JIT code in anonymous memory: the
 * perf-map plugin (sdk/examples/perfmap) gives each marked frame its name
 * from /tmp/perf-PID.map, so the profile shows `JS:*fn`, not an
 * unnamed native frame (`+0x...`) with the name beside it. A mark with more
 * than one replacing frame is replaced by all of them, in order.
 * Additive (no layout changes, OMNIPROF_BPF_ABI_VERSION stays 5): a host
 * that honours it accepts plugin ABI 2.1 (plugin.h), and a plugin built
 * with these headers declares 2.1, so an older host refuses it rather than
 * show the frame twice. */
#define OMNIPROF_FRAME_REPLACES_MARK (1u << 1)

struct omniprof_stack {
  omniprof_u32 len;
  omniprof_u32 reserved;
  struct omniprof_frame frames[OMNIPROF_MAX_STACK_DEPTH]; /* leaf first */
};

/* Stacks are stored in stack_traces as fragments of
 * OMNIPROF_FRAGMENT_FRAMES frames under (stack id, fragment index), so a
 * stack costs what it holds: a 20-frame stack takes two fragments, not the
 * room of 512 frames. The stack's length travels in the stack key. */
#define OMNIPROF_FRAGMENT_FRAMES 16
#define OMNIPROF_MAX_FRAGMENTS (OMNIPROF_MAX_STACK_DEPTH / OMNIPROF_FRAGMENT_FRAMES)

struct omniprof_stack_fragment_key {
  omniprof_u64 stack_id;
  omniprof_u32 index; /* frames [index * 16, index * 16 + 16) of the stack */
  omniprof_u32 reserved;
};

struct omniprof_stack_fragment {
  struct omniprof_frame frames[OMNIPROF_FRAGMENT_FRAMES];
};

#define OMNIPROF_COMM_LEN 16

struct omniprof_stack_key {
  omniprof_u32 pid; /* process (tgid) */
  omniprof_u32 tid; /* thread */
  omniprof_u64 user_stack_id;
  omniprof_u64 kernel_stack_id;
  omniprof_u16 user_stack_len;
  omniprof_u16 kernel_stack_len;
  /* A label the interpreter unwinder in slot label_slot put on the sample
   * (pyperf: whether the thread held the GIL); the host names it from that
   * plugin's label_key / label_values. 0 and 0: no label. */
  omniprof_u8 label_slot;
  omniprof_u8 label_value;
  omniprof_u16 reserved;
  char thread_name[OMNIPROF_COMM_LEN];
};

/* When one sample was taken (bpf_ktime_get_ns: CLOCK_MONOTONIC) and under
 * which key it was counted: a record of the host's sample_times ring buffer,
 * written after the count when the host asks for per-sample times (OTLP
 * export). Private to the host's entry object: plugins never see it. */
struct omniprof_sample_time {
  omniprof_u64 ktime_ns;
  struct omniprof_stack_key key;
};

/* What BPF added to the maps a drain empties (agent/drain_schedule.h), as
 * running totals over every CPU since load, and the totals past which the
 * host wants to look at them before the round's end: the host's entry
 * object sends OMNIPROF_EVENT_DRAIN_DUE once when one is passed, and the
 * host arms it again after its look. So `run` wakes when the maps fill, not
 * every second to find out whether they do. Private to the host's entry
 * object: plugins never see them. */
enum omniprof_inflow_kind {
  OMNIPROF_INFLOW_COUNT_KEYS = 0,   /* new stack_counts keys */
  OMNIPROF_INFLOW_FRAGMENTS = 1,    /* stack_traces fragments stored */
  OMNIPROF_INFLOW_SAMPLE_TIMES = 2, /* sample_times records (when recorded) */
  OMNIPROF_INFLOW_KINDS = 4,        /* a power of two: an index is masked with KINDS - 1 */
};

struct omniprof_inflow_totals {
  omniprof_u64 added[OMNIPROF_INFLOW_KINDS]; /* by enum omniprof_inflow_kind */
};

struct omniprof_drain_thresholds {
  omniprof_u64 at[OMNIPROF_INFLOW_KINDS]; /* totals that make a look due; ~0: never */
  omniprof_u32 armed;                     /* 1: send the event once; BPF sets 0 when sent */
  omniprof_u32 reserved;
};

/* ---- Processes -------------------------------------------------------------*/
#define OMNIPROF_PROCESS_KNOWN (1u << 0)
#define OMNIPROF_PROCESS_MAPPINGS_TRUNCATED (1u << 1)

/* An executable mapping: [start, end) in the process, and how to get the
 * address inside the file (ELF virtual address) from a process address. */
struct omniprof_process_mapping {
  omniprof_u64 start;
  omniprof_u64 end;
  omniprof_u64 load_bias; /* process address - ELF virtual address */
  omniprof_u64 file_id;   /* executable id (ExecutableInfoManager); 0 = not a file */
};

/* Enough for most processes (a Python or Ruby process maps 20 to 50
 * executable files); past it the process carries
 * OMNIPROF_PROCESS_MAPPINGS_TRUNCATED and the mappings left out keep
 * frame-pointer unwinding. Preallocated per process: 2 KiB each. A power of two so
 * the walker's binary search has a fixed number of steps. */
#define OMNIPROF_MAX_MAPPINGS 64
#define OMNIPROF_MAPPING_SEARCH_STEPS 6 /* log2(OMNIPROF_MAX_MAPPINGS) */

/* Code of the process that is an interpreter's evaluation loop (pyperf:
 * _PyEval_EvalFrameDefault), as process addresses [start, end). */
#define OMNIPROF_MAX_INTERPRETER_RANGES 4
struct omniprof_code_range {
  omniprof_u64 start;
  omniprof_u64 end;
};

struct omniprof_process_info {
  omniprof_u32 flags;
  /* Slot of the interpreter unwinder for this process, 0 for none. */
  omniprof_u32 interpreter_slot;
  /* Owned by the interpreter plugin (e.g. thread-state address, offsets index). */
  omniprof_u64 interpreter_data[6];
  omniprof_u32 num_mappings;
  omniprof_u32 num_interpreter_ranges;
  /* A native frame whose pc lies in one of these ran interpreter code: the
   * native walker marks it, and the interpreter unwinder puts the frames it
   * ran right after it (see omniprof_unwind_state.marks). */
  struct omniprof_code_range interpreter_ranges[OMNIPROF_MAX_INTERPRETER_RANGES];
  struct omniprof_process_mapping mappings[OMNIPROF_MAX_MAPPINGS]; /* sorted by start */
};

/* ---- Native unwind tables ------------------------------------------------
 * Rows live in shards: ARRAY maps of OMNIPROF_ROWS_PER_SHARD rows, the inner
 * maps of the ARRAY_OF_MAPS unwind_shards. A shard is created only when the
 * store needs space (the host creates it on the plugin's request, through
 * omniprof_host_api.create_inner_map) up to the memory budget the config
 * sets (maps.unwind_memory_mb), which also sizes unwind_shards.
 * Each executable's table is stored as chunks: a chunk is a PC range of the
 * file mapped to a run of rows inside one shard, and never splits a function.
 * A row is 8 bytes: the PC as an offset from the chunk's start and an index
 * into unwind_rules, where the distinct (CFA, RBP) rules of every table are
 * stored once. */
#define OMNIPROF_ROWS_PER_SHARD (1u << 17)
#define OMNIPROF_ROW_SEARCH_STEPS 18 /* > log2(OMNIPROF_ROWS_PER_SHARD) */
/* 32 chunks of at most one shard each: a table of 4M rows (a Chrome-sized
 * executable has about 3M) fits even when it is cut into shards' leftovers.
 * A power of two, so the walker's binary search has a fixed number of steps. */
#define OMNIPROF_MAX_CHUNKS 32
#define OMNIPROF_CHUNK_SEARCH_STEPS 5 /* log2(OMNIPROF_MAX_CHUNKS) */
#define OMNIPROF_MAX_UNWIND_RULES 65536
/* Bytes of one shard's rows (1 MiB). */
#define OMNIPROF_UNWIND_SHARD_BYTES (OMNIPROF_ROWS_PER_SHARD * 8u)
/* Default budget of shards (maps.unwind_memory_mb): the unwind space grows
 * to this many MiB of rows, no further. */
#define OMNIPROF_DEFAULT_UNWIND_MEMORY_MB 48

struct omniprof_unwind_row {
  omniprof_u32 pc_offset; /* from the chunk's low_pc */
  omniprof_u16 rule;      /* index into unwind_rules */
  omniprof_u16 reserved;
};

enum omniprof_cfa_type {
  OMNIPROF_CFA_RSP = 0,            /* CFA = rsp + cfa_offset */
  OMNIPROF_CFA_RBP = 1,            /* CFA = rbp + cfa_offset */
  OMNIPROF_CFA_PLT = 2,            /* PLT stub: rsp + 8 + ((rip & 15) >= cfa_offset ? 8 : 0) */
  OMNIPROF_CFA_END_OF_FUNCTION = 3, /* no function here: the gap after one */
  OMNIPROF_CFA_OUTERMOST = 4,      /* return address undefined: bottom of the stack */
  OMNIPROF_CFA_UNSUPPORTED = 5,    /* a rule BPF cannot evaluate: try frame pointers */
};

enum omniprof_rbp_type {
  OMNIPROF_RBP_UNCHANGED = 0,
  OMNIPROF_RBP_AT_CFA_OFFSET = 1, /* caller's rbp saved at CFA + rbp_offset */
  OMNIPROF_RBP_UNSUPPORTED = 2,
};

struct omniprof_unwind_rule {
  omniprof_u8 cfa_type;
  omniprof_u8 rbp_type;
  omniprof_u16 reserved;
  omniprof_s32 cfa_offset;
  omniprof_s32 rbp_offset;
};

struct omniprof_unwind_chunk {
  omniprof_u64 low_pc;      /* ELF virtual address of the first row */
  omniprof_u32 high_offset; /* the chunk covers [low_pc, low_pc + high_offset) */
  omniprof_u32 shard;       /* index in unwind_shards */
  omniprof_u32 first_row;   /* index in that shard */
  omniprof_u32 num_rows;
};

/* An executable_unwind_info entry with no chunks and this flag stands for a
 * table the host is building now: it writes the entry before it publishes
 * the mappings of a process that maps the file and before the build starts,
 * and the store's real entry (flags 0) replaces it; a build that stores
 * nothing removes it. The walker reads the flag only where it found no
 * chunk (a walk that would fall back to frame pointers anyway), to count the
 * walk as OMNIPROF_STAT_NATIVE_WALKS_TABLE_BUILDING: nothing on the path of a
 * frame a table covers. Additive (the former `reserved`, always 0):
 * OMNIPROF_BPF_ABI_VERSION stays 5. */
#define OMNIPROF_UNWIND_INFO_BUILDING (1u << 0)

struct omniprof_executable_unwind_info {
  omniprof_u32 num_chunks;
  omniprof_u32 flags; /* OMNIPROF_UNWIND_INFO_BUILDING */
  struct omniprof_unwind_chunk chunks[OMNIPROF_MAX_CHUNKS]; /* sorted by low_pc, not overlapping */
};

/* ---- Events to the host (ring buffer "events") ----------------------------*/
enum omniprof_event_type {
  OMNIPROF_EVENT_PROCESS_UNKNOWN = 1, /* sampled a process the host has not described */
  OMNIPROF_EVENT_EXEC = 2,            /* a known process called exec: mappings changed */
  OMNIPROF_EVENT_EXIT = 3,            /* a known process's leader exited */
  OMNIPROF_EVENT_MAPPINGS_STALE = 4,  /* sampled a pc outside the known mappings (dlopen) */
  /* A walk noted something new in a plugin's seen map (OMNIPROF_SEEN_MAP):
   * the plugins' tick reads it now, while the process lives, not on the
   * next 200 ms timer (a short-lived process is gone by then). */
  OMNIPROF_EVENT_TICK_DUE = 5,
  /* The host's own STOP program passed a drain threshold (struct
   * omniprof_drain_thresholds); pid 0. Sent on the host object's own
   * `drain_due` ring, never on `events`; plugins never send it. */
  OMNIPROF_EVENT_DRAIN_DUE = 6,
};

/* event_requests' key: what a walk asked the host (enum omniprof_event_type)
 * about which process. BPF asks the same at most once a second; the host
 * deletes a key to let it ask again at once (new mappings published). */
#define OMNIPROF_EVENT_REQUEST_KEY(type, pid) (((omniprof_u64)(type) << 32) | (omniprof_u32)(pid))

struct omniprof_event {
  omniprof_u32 type;
  omniprof_u32 pid;
  omniprof_u64 ktime_ns;
};

/* ---- Per-CPU unwind state, carried across tail calls ----------------------*/
/* The current frame was reached through frame pointers, not unwind tables
 * or the sampled registers: its pc may be garbage (code without frame
 * pointers), so a pc outside every mapping proves nothing about dlopen. */
#define OMNIPROF_WALK_FROM_FRAME_POINTER (1u << 0)
/* The native walk is over; what is left is the interpreter's and STOP's. */
#define OMNIPROF_WALK_NATIVE_DONE (1u << 1)
/* The walk met a table being built (counted once per walk). */
#define OMNIPROF_WALK_TABLE_BUILDING (1u << 2)
/* The walk noted something new in a seen map: STOP asks for a tick. */
#define OMNIPROF_WALK_NOTED_NEW (1u << 3)

/* The hand-off between the native walker and an interpreter unwinder.
 *
 * The native walker walks the whole native stack first and marks each
 * native frame whose pc lies in one of the process's interpreter_ranges
 * (marks[i] = how many native frames there are up to and including it).
 * Then it tail-calls the process's interpreter slot once. The interpreter
 * walks its own frames from the innermost and appends them after the native
 * frames, each giving the mark it belongs to (omniprof_interpreter_frame:
 * CPython up to 3.10 one frame per evaluation loop call, 3.11+ every frame up
 * to its entry frame); each such frame is stored OMNIPROF_FRAME_SPLICED with
 * `after` = its mark, and the host, reading the stack, puts it right after
 * that native frame. Frames beyond the last mark (the native walk stopped
 * early) go after the last native frame.
 *
 * Why not hand over per frame (native -> interpreter -> native at every
 * evaluation loop frame): two tail calls per interpreter frame, and the
 * kernel allows 33 per sample, so a 100-deep Python 3.10 recursion could
 * never come out whole. Why not splice in BPF: a merge loop over 512 frames
 * with data-dependent branches is more than a 5.10 verifier will walk; the
 * host does it in a few lines. This way a sample costs a handful of tail
 * calls and the stored stack is as long as the frames it holds. */
#define OMNIPROF_MAX_MARKS 256

struct omniprof_unwind_state {
  omniprof_u64 ip;
  omniprof_u64 sp;
  omniprof_u64 bp;
  omniprof_u32 tail_calls;
  omniprof_u32 stop_reason; /* a percpu_stats index saying why the walk ended */
  omniprof_u32 walk_flags;  /* OMNIPROF_WALK_*: what the current registers came from */
  omniprof_u32 num_marks;
  omniprof_u32 native_frames; /* frames the native walk pushed (set when it ends) */
  omniprof_u32 reserved;
  /* Owned by the interpreter unwinder: where its walk stands across its own
   * tail calls (pyperf: the next frame to read, the mark it is filling). */
  omniprof_u64 interpreter_walk[6];
  struct omniprof_stack_key key;
  omniprof_u16 marks[OMNIPROF_MAX_MARKS]; /* native frames up to each marked one */
  struct omniprof_stack stack;
  omniprof_u64 kernel_ips[OMNIPROF_MAX_KERNEL_DEPTH]; /* bpf_get_stack's output */
};

/* ---- Shared map names and default sizes ------------------------------------*/
#define OMNIPROF_MAP_PROGRAMS "programs"
#define OMNIPROF_MAP_STACK_COUNTS "stack_counts"
#define OMNIPROF_MAP_STACK_TRACES "stack_traces"
#define OMNIPROF_MAP_PROCESS_INFO "process_info"
#define OMNIPROF_MAP_PERCPU_STATS "percpu_stats"
#define OMNIPROF_MAP_UNWIND_STATE "unwind_state"
#define OMNIPROF_MAP_UNWIND_SHARDS "unwind_shards"
#define OMNIPROF_MAP_UNWIND_RULES "unwind_rules"
#define OMNIPROF_MAP_UNWIND_INFO "executable_unwind_info"
#define OMNIPROF_MAP_EVENTS "events"
#define OMNIPROF_MAP_EVENT_REQUESTS "event_requests"
#define OMNIPROF_MAP_SAMPLE_TIMES "sample_times"

#define OMNIPROF_DEFAULT_STACK_COUNTS 10240
#define OMNIPROF_DEFAULT_STACK_TRACES 32768 /* fragments of 16 frames */
#define OMNIPROF_DEFAULT_PROCESSES 4096
#define OMNIPROF_DEFAULT_EXECUTABLES 2048

#endif /* OMNIPROF_BPF_ABI_H */
