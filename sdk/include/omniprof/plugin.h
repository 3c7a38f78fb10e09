/* omniprof plugin boundary, version 2.4.
 *
 * A plugin is a shared object that exports exactly one symbol,
 * OMNIPROF_PLUGIN_ENTRY_SYMBOL, a function returning a pointer to a static
 * `struct omniprof_plugin`. The boundary is plain C so that a plugin built by
 * another compiler, or another C++ standard library, still loads.
 *
 * Versioning (the policy: VERSIONING.md beside this header): the host
 * refuses a plugin whose abi_major differs from its own or whose abi_minor
 * is newer, and accepts one whose abi_minor is older (fields added in later
 * minors sit at the end of the structs and are guarded by struct_size). A
 * plugin whose BPF object was built against another OMNIPROF_BPF_ABI_VERSION
 * is refused. `omniprof plugins` prints the versions the host accepts.
 * 2.0 (from 1.2): frames are struct omniprof_frame (BPF ABI 5), so
 * symbolize_frame takes one; mappings carry their load bias and file id;
 * detect_process returns the interpreter's code ranges; programs may need a
 * kernel feature; plugins may label samples, reach their own BPF maps
 * (private_map_fd) and be called periodically (tick).
 * 2.1 (from 2.0): the host honours OMNIPROF_FRAME_REPLACES_MARK (abi.h: a
 * spliced frame that takes its mark's place, for JIT code the native walker
 * steps through), and offers a process to detect_process in slot order
 * (ruby, python, then third parties), so that a third-party plugin claims
 * only what no in-tree interpreter plugin did. Nothing moved: a 2.0 plugin
 * loads unchanged.
 * 2.2 (from 2.1): what a profile reader sees. detect_process may name the
 * files that hold the interpreter's own native code
 * (omniprof_process_attach.interpreter_file_ids), whose frames the host folds
 * into the interpreter frame they serve; a plugin names the type of its frames
 * (frame_type: "python", "ruby", "jit"); the native plugin may give the
 * function around an address that no symbol names (function_bounds, from the
 * file's unwind information). Fields appended; a 2.1 plugin loads unchanged
 * (nothing folded for it, its frames typed by its runtime name).
 * 2.3 (from 2.2): per file, then per process. A plugin may describe each
 * file a process maps (describe_file), once per file id: the host keeps the
 * description and hands it to every detect_process of a process mapping that
 * file (omniprof_process.file_descriptions), so that what a file says (where
 * its interpreter loop is) is read once, and a dlopen needs no new reading
 * of the files already described. Hook and field appended; a 2.2 plugin
 * loads unchanged (never asked to describe a file).
 * 2.4 (from 2.3): a tick on notice only. A plugin whose tick only reads what
 * its walks noted (tick_flags: OMNIPROF_TICK_ON_NOTICE_ONLY) is not ticked
 * every second as well; with no plugin wanting that, the host's tick thread
 * sleeps until a notice. Field appended; a 2.3 plugin loads unchanged and is
 * ticked every second as before.
 *
 * File name and runtime: a plugin file is named `<runtime>.so`, its
 * `runtime` field followed by ".so" (native.so, python.so, a third party's
 * perfmap.so), in a plugin directory. The host reads the runtime from the
 * file name so that a runtime the config disables (`runtimes: {perfmap:
 * false}`) has its file never opened (opening runs its constructors); once
 * opened, a plugin whose `runtime` differs from its file name is refused.
 *
 * Trust: the host (root) refuses, without opening it, a plugin file that
 * anyone but root could have written: owned by another user, group- or
 * world-writable, or in a directory like that anywhere up to `/` (a
 * root-owned sticky directory such as /tmp is passed through). Install
 * plugins root-owned, mode 0644 or 0755, in root-owned 0755 directories.
 *
 * Ownership: every pointer the plugin returns in `struct omniprof_plugin`
 * stays valid until the shared object is unloaded. Every pointer the host
 * passes in (strings, the host API) is valid for the duration of the call,
 * except `struct omniprof_host_api`, which lives until `destroy` returns.
 *
 * Threading: the host calls `create` and `destroy` once each, from one
 * thread. The other hooks are called from more than one host thread (today
 * the event thread, the start-up scan thread and the main thread call
 * detect_process, describe_file, process_gone, load_executable and
 * unload_executable; the main thread also calls symbolize_frame and
 * function_bounds at the end of each round; a tick thread of its own calls
 * tick), but the host
 * holds one lock per instance for the whole of every hook call (create and
 * destroy included): two calls into the same instance never overlap, and
 * each call sees everything the previous one wrote. State only the hooks
 * touch needs no lock of the plugin's own. Calls into different instances
 * may run at the same time. A hook that blocks holds up its caller: the host
 * tracks processes on one event thread, which also calls detect_process,
 * describe_file and (for a file first mapped) load_executable inline, so a
 * long table build or file read delays the host's view of the processes
 * that appear meanwhile (their samples are still walked, without what the
 * delayed hooks would have stored). Keep hooks short. The host API functions
 * are safe to call from any thread at any time between `create` and the
 * return of `destroy`, including from inside a hook; the strings a hook
 * returns (omniprof_symbol) are copied before the lock is released.
 *
 * Errors: hooks return an omniprof_status; on failure they may write a
 * NUL-terminated reason into the `error` buffer the host passes.
 */
#ifndef OMNIPROF_PLUGIN_H
#define OMNIPROF_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OMNIPROF_PLUGIN_ABI_MAJOR 2
#define OMNIPROF_PLUGIN_ABI_MINOR 4
#define OMNIPROF_PLUGIN_ENTRY_SYMBOL "omniprof_plugin_entry"

#if defined(__GNUC__)
#define OMNIPROF_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define OMNIPROF_PLUGIN_EXPORT
#endif

typedef enum omniprof_status {
  OMNIPROF_OK = 0,
  OMNIPROF_NOT_MINE = 1,            /* detect_process: this process is not for this plugin */
  OMNIPROF_ERR_INVALID_ARGUMENT = -1,
  OMNIPROF_ERR_IO = -2,             /* a file or process memory could not be read */
  OMNIPROF_ERR_PARSE = -3,          /* data (offsets YAML, ELF, process memory) is malformed */
  OMNIPROF_ERR_UNSUPPORTED = -4,    /* e.g. a runtime version without offsets */
  OMNIPROF_ERR_NO_MEMORY = -5,
  OMNIPROF_ERR_INTERNAL = -6,
  OMNIPROF_ERR_NO_SPACE = -7,       /* a BPF map is full: the host retries later */
  /* This executable can never be stored, however much room is made (its
   * table needs more chunks than an executable may have, or a chunk's
   * address range does not fit its 32-bit offsets): the host does not retry
   * it and does not evict others for it, until the file comes back with
   * another file id. Additive, no minor bump of its own: a host that does
   * not know it treats it as any other error (retried with backoff). */
  OMNIPROF_ERR_TOO_LARGE = -8,
} omniprof_status;

typedef enum omniprof_module_type {
  OMNIPROF_MODULE_NATIVE = 1,
  OMNIPROF_MODULE_RBPERF = 2,
  OMNIPROF_MODULE_PYPERF = 3,
  OMNIPROF_MODULE_THIRD_PARTY = 4,
} omniprof_module_type;

typedef enum omniprof_log_level {
  OMNIPROF_LOG_DEBUG = 0,
  OMNIPROF_LOG_INFO = 1,
  OMNIPROF_LOG_WARN = 2,
  OMNIPROF_LOG_ERROR = 3,
} omniprof_log_level;

#define OMNIPROF_ERROR_LEN 256

/* What the host gives a plugin. Lives from `create` until `destroy` returns. */
struct omniprof_host_api {
  uint32_t struct_size;
  void *host;
  /* Logs through the host's logger (spdlog's registry is per shared object,
   * so plugins must not log through their own). */
  void (*log)(void *host, omniprof_log_level level, const char *message);
  /* Fd of the shared map with that name (see bpf/include/omniprof/bpf/abi.h),
   * or -1. The host owns the fd: do not close it. */
  int (*map_fd)(void *host, const char *map_name);
  /* Reads `len` bytes of process memory; returns bytes read or a negative errno. */
  int64_t (*read_process_memory)(void *host, int32_t pid, uint64_t address, void *buffer,
                                 uint64_t len);
  /* Looks a symbol up in an ELF file's .symtab/.dynsym (or its separate debug
   * file). Returns OMNIPROF_OK and fills value (the symbol's ELF virtual
   * address) and size, OMNIPROF_NOT_MINE if absent, or an error. */
  omniprof_status (*elf_symbol)(void *host, const char *path, const char *symbol,
                                uint64_t *value, uint64_t *size);

  /* Creates the inner map at `index` of the shared map-of-maps `map_name`
   * (an ARRAY_OF_MAPS of bpf/include/omniprof/bpf/abi.h, such as
   * OMNIPROF_MAP_UNWIND_SHARDS), shaped like that map's inner-map template,
   * puts it there and writes its fd to *fd; if that index already holds a
   * map the host created, writes that map's fd instead.
   *
   * Ownership: the host owns the new map and its fd, keeps both until
   * `destroy` returns, and counts the map's memory in its own (the
   * host.bpf_map_bytes counter). The plugin writes through the fd but must
   * not close it.
   * Budget: each map-of-maps has a memory budget in the host's config
   * (unwind_shards: maps.unwind_memory_mb, which also sets its max_entries);
   * an index at or past max_entries, or a map that would take the inner
   * maps past the budget, is refused with OMNIPROF_ERR_NO_SPACE.
   * Other errors: OMNIPROF_ERR_INVALID_ARGUMENT (no such shared
   * map-of-maps, fd is NULL), OMNIPROF_ERR_NO_MEMORY (the kernel refused to
   * create the map).
   * Threading: safe from any thread; concurrent calls are serialized by the
   * host. */
  omniprof_status (*create_inner_map)(void *host, const char *map_name, uint32_t index, int *fd);

  /* Fields added in later 2.x minors go below, present when struct_size
   * covers them (a plugin may be handed the API of an older host build). */

  /* Fd of a map of the calling plugin's own BPF object (one it declares that
   * is not a shared map: per-version offset tables, caches), or -1. The host
   * owns the fd (it lives with the object, until `destroy` returns): do not
   * close it. Each plugin gets its own host API; `host` tells them apart. */
  int (*private_map_fd)(void *host, const char *map_name);
};

/* What a program needs from the kernel beyond 5.10's BPF. */
#define OMNIPROF_PROGRAM_NEEDS_BPF_LOOP (1u << 0) /* bpf_loop: 5.17+ */

/* A program of the plugin's BPF object and the tail-call slot it fills.
 * slot is an enum omniprof_slot; a THIRD_PARTY plugin passes
 * OMNIPROF_SLOT_THIRD_PARTY_FIRST and the host assigns a free slot, which
 * its BPF object learns from `const volatile __u32 omniprof_self_slot` (the
 * contract of a plugin's BPF object: bpf/include/omniprof/bpf/unwinder.bpf.h;
 * frame kinds, marks, counters: abi.h).
 * A plugin fills one slot, and may offer more than one program for it: the
 * host loads the first one, in list order, whose `needs` the running kernel
 * meets (probed by the host), and does not load the others. List the
 * program that needs the most first, and one that needs nothing last. */
struct omniprof_program_slot {
  const char *program_name;
  uint32_t slot;
  uint32_t needs; /* OMNIPROF_PROGRAM_NEEDS_* */
};

/* A process as the host sees it when it asks plugins whether it is theirs. */
struct omniprof_mapping {
  uint64_t start;
  uint64_t end;
  uint64_t file_offset;
  uint64_t load_bias; /* process address - ELF virtual address of this mapping */
  uint64_t file_id;   /* the host's id for the file's contents (as in load_executable); 0 = none */
  const char *path; /* reaches the file the process maps from the host (also when
                     * deleted or replaced on disk): /proc/self/fd/N of a
                     * descriptor the host keeps, or /proc/PID/map_files/...;
                     * not the name the process sees */
};

struct omniprof_process {
  int32_t pid;
  const char *exe_path; /* as reachable from the host */
  const char *comm;
  const struct omniprof_mapping *mappings; /* executable mappings */
  size_t num_mappings;
  /* The name each mapping's file has for the process, as /proc/PID/maps
   * shows it (without " (deleted)"), parallel to `mappings`: what a plugin
   * recognises a runtime by ("libpython3.12.so.1.0"), where `path` is only a
   * way to read the file. */
  const char *const *mapping_names;
  /* 2.3. What this plugin's describe_file said about each mapping's file,
   * parallel to `mappings`: the description it returned for that file id,
   * NULL where it returned none, where the mapping has file_id 0 (a file the
   * host could not identify is never described), or when the plugin has no
   * describe_file. NULL itself for a plugin without describe_file. */
  const void *const *file_descriptions;
};

/* What detect_process fills when a process is the plugin's. */
struct omniprof_process_attach {
  /* Copied to omniprof_process_info.interpreter_data, which the plugin's BPF
   * program reads (bpf/include/omniprof/bpf/abi.h; plugin.hpp asserts that
   * the two sizes agree). */
  uint64_t interpreter_data[6];
  char runtime_version[32];     /* e.g. "3.12.1", shown in labels and logs */
  /* The interpreter's evaluation loop code, as process addresses [start, end)
   * (pyperf: _PyEval_EvalFrameDefault of the libpython this process maps).
   * The native walker marks each native frame whose pc lies here, and this
   * plugin's program then gives each mark the interpreter frames it ran (see
   * omniprof_unwind_state in bpf/include/omniprof/bpf/abi.h). detect_process
   * runs again whenever the host re-reads the mappings (dlopen, exec), so the
   * ranges follow a libpython loaded late. At most
   * OMNIPROF_MAX_INTERPRETER_RANGES of abi.h (4: plugin.hpp asserts that the
   * array has that many); the host takes no more than that. */
  struct {
    uint64_t start;
    uint64_t end;
  } interpreter_ranges[4];
  uint32_t num_interpreter_ranges;

  /* 2.2. The files whose native code is the interpreter's own (the python
   * or ruby executable, libpython, libruby), by the file_id of their
   * mappings (omniprof_mapping.file_id; 0 entries are ignored). Unless the
   * config keeps every native frame (profile.interpreter_native_frames: keep),
   * the host drops native frames of these files that lie leafward of the
   * process's innermost interpreter frame (their samples become that frame's
   * self time) or between two interpreter frames (the evaluation loop and
   * call machinery an interpreter frame runs in); frames of any other file
   * stay in place. A plugin of an older minor leaves them 0: nothing folded.
   * At most OMNIPROF_MAX_INTERPRETER_FILES (4). */
  uint64_t interpreter_file_ids[4];
  uint32_t num_interpreter_file_ids;
};
#define OMNIPROF_MAX_INTERPRETER_FILES 4

/* A symbolized frame. Strings are copied by the host before the next call. */
struct omniprof_symbol {
  const char *function;
  const char *file;
  int64_t line;
};

/* A frame as the BPF program stored it: the first three fields of struct
 * omniprof_frame (bpf/include/omniprof/bpf/abi.h), copied by the host, at
 * the same offsets (plugin.hpp asserts it). Not its `flags` and `after`:
 * the host has put a spliced frame in its place before a plugin names it. */
struct omniprof_frame_data {
  uint64_t address;
  uint32_t detail;
  uint8_t kind;
};

struct omniprof_plugin {
  uint16_t abi_major;
  uint16_t abi_minor;
  uint32_t struct_size;   /* sizeof(struct omniprof_plugin) the plugin was built with */
  uint32_t bpf_abi_version; /* OMNIPROF_BPF_ABI_VERSION of its BPF object */

  const char *name;        /* unique, e.g. "native" */
  const char *version;     /* the plugin's own version string */
  const char *runtime;     /* the config key that enables it: "native", "ruby", ...;
                            * the plugin file must be named "<runtime>.so" */
  omniprof_module_type module_type;

  /* The plugin's BPF object (an ELF image). Shared maps it declares are
   * replaced by the host's before load; its private maps are its own. */
  const void *bpf_object;
  size_t bpf_object_size;
  const struct omniprof_program_slot *programs;
  size_t num_programs;

  /* Names of the counters in the plugin's percpu_stats range, in order. */
  const char *const *stat_names;
  size_t num_stat_names;

  /* Creates an instance. data_dir holds the files the plugin ships (offsets
   * YAML...), assigned_slot the slot its programs were placed in. */
  omniprof_status (*create)(const struct omniprof_host_api *host, const char *data_dir,
                            uint32_t assigned_slot, void **instance, char *error);
  void (*destroy)(void *instance);

  /* Optional. OMNIPROF_OK and `attach` filled if the process runs this
   * plugin's runtime; OMNIPROF_NOT_MINE otherwise. A process has one
   * interpreter plugin: the first to say OMNIPROF_OK, asked in slot order
   * (rbperf 2, pyperf 3, then third parties by their assigned slot). */
  omniprof_status (*detect_process)(void *instance, const struct omniprof_process *process,
                                    struct omniprof_process_attach *attach, char *error);
  /* Optional. The process called exec (at once, before detect_process sees
   * its new image), or exited: then at the end of the round it exited in,
   * after that round's frames were named (symbolize_frame), so what the
   * plugin kept to name them may go now. */
  void (*process_gone)(void *instance, int32_t pid);
  /* Optional. Names a frame of this plugin's kind (the frame kind equal to
   * its slot) that process `pid` produced. NULL for the native plugin, whose
   * frames the host names from ELF. Called after the process may have
   * exited: a plugin that needs the process's memory reads it earlier (tick)
   * and keeps it. OMNIPROF_OK with symbol->function set; an error makes the
   * host show the frame as "[unknown <runtime>]" and count it. */
  omniprof_status (*symbolize_frame)(void *instance, int32_t pid, const struct omniprof_frame_data *frame,
                                     struct omniprof_symbol *symbol, char *error);

  /* Optional. The first process mapping the executable file `file_id` (an id
   * computed by the host from the file's contents, the same for every copy
   * of the file) has appeared; `path` reaches the file from the host (a
   * descriptor the host keeps open, /proc/self/fd/N, until
   * unload_executable; the number may name another file after that. Past
   * the host's descriptor budget it is /proc/PID/map_files/..., valid while
   * that process lives). The
   * native plugin builds and stores its unwind table here. Returns
   * OMNIPROF_OK, OMNIPROF_ERR_NO_SPACE (the host retries later, after
   * unloading others), OMNIPROF_ERR_TOO_LARGE (never retried), or another
   * error (the host retries with backoff). With OMNIPROF_OK, a message in
   * `error` says what of the file was left out (the native plugin: malformed
   * FDEs skipped); the host logs it with the file's name and counts such
   * loads. */
  omniprof_status (*load_executable)(void *instance, uint64_t file_id, const char *path,
                                     char *error);
  /* Optional. Let go of what the plugin keeps about `file_id`: the last
   * process mapping it is gone (the host calls every plugin then, whether
   * or not load_executable succeeded for it), or, for a plugin with
   * load_executable only, the host dropped the file's data while processes
   * still map it (evicted to make room, or another plugin's load of it
   * failed) and may call load_executable for it again. */
  void (*unload_executable)(void *instance, uint64_t file_id);

  /* Optional. `omniprof debug COMMAND ARGUMENT` for the commands named in
   * debug_commands; output goes through `write`. */
  const char *const *debug_commands;
  size_t num_debug_commands;
  omniprof_status (*debug_command)(void *instance, const char *command, const char *argument,
                                   void (*write)(void *context, const char *text, size_t len),
                                   void *context, char *error);

  /* Optional. Called by the host at once (within a millisecond or so) after
   * a walk noted something new in a plugin's seen map (bpf/:
   * OMNIPROF_SEEN_MAP, omniprof_note_seen), and about every second while it
   * samples (for a notice the full events ring lost; with
   * OMNIPROF_TICK_ON_NOTICE_ONLY in tick_flags, instead, at the host's next
   * look at BPF's counters after the ring lost one: at once after a consume
   * of the ring large enough that it may have been full, at the latest at
   * the round's end), from one thread, under
   * the instance's lock like every hook: the time to read what
   * symbolize_frame will need from processes that may exit before the round
   * ends (pyperf: the code objects its BPF program saw), while they still
   * live: a process that runs 30 ms is gone long before the periodic call. */
  void (*tick)(void *instance);

  /* Optional. A label the plugin's BPF program puts on samples
   * (omniprof_label_sample): the profile shows label_key=label_values[value]
   * for a sample labelled `value` (1 to num_label_values - 1; 0 = none).
   * pyperf: "python_gil", {NULL, "held", "released"}. */
  const char *label_key;
  const char *const *label_values;
  size_t num_label_values;

  /* Fields of 2.2 (absent, read as NULL, for a plugin of an older minor). */

  /* Optional. What this plugin's frames are, as profiles show it (the host
   * writes it as the frames' type: pprof Function.system_name
   * "<frame_type>:<name>", the flamegraph's colour, `record`'s listing):
   * lowercase letters, digits and '_' only, such as "python", "ruby", "jit".
   * NULL: the plugin's runtime name. */
  const char *frame_type;

  /* Optional, for the native plugin (OMNIPROF_MODULE_NATIVE): the function
   * that holds ELF virtual address `address` of the executable `file_id`
   * (`path` reaches the file as in load_executable, though not necessarily
   * by the same string: the host's kept descriptor, else the process's
   * /proc/PID/map_files entry), from the file's unwind information (the FDE
   * that covers it), for a frame no symbol names. The host calls it only for
   * such frames, at the end of a round, and names the frame after the
   * function's start ("python3.11+0x5a8500"), so that every sample of one
   * unnamed function is one row. OMNIPROF_OK with [*start, *end) in ELF
   * virtual addresses, holding `address` (else the host counts an error);
   * OMNIPROF_NOT_MINE when no FDE covers the address; an error (unreadable
   * file) with `error` set. The ranges a plugin gives for one file must not
   * overlap: the host keeps each one per file_id, across rounds, and names
   * every later address inside it without asking again. The plugin may
   * cache per file_id until unload_executable. */
  omniprof_status (*function_bounds)(void *instance, uint64_t file_id, const char *path, uint64_t address,
                                     uint64_t *start, uint64_t *end, char *error);

  /* Fields of 2.3 (absent, read as NULL, for a plugin of an older minor). */

  /* Optional. What the file `file_id` (as in load_executable; never 0) is to
   * this plugin, for its detect_process: the host calls it the first time
   * it offers the plugin a process mapping that file, before that
   * detect_process, keeps *description by file id, and hands it to every
   * detect_process of a process mapping the file
   * (omniprof_process.file_descriptions), without calling describe_file
   * again, until it calls unload_executable for that file id (see there);
   * a process mapping it after that has it described again. `path`
   * reaches the file as in omniprof_mapping.path; `name` is the name the
   * first process it was described for gives it (as mapping_names), which
   * may differ in another process mapping the same contents. OMNIPROF_OK
   * with *description set to what the plugin keeps about the file (NULL:
   * nothing of this plugin's); the plugin owns it and keeps it valid until
   * unload_executable for that file id returns. An error (with `error`
   * set) is logged by the host and the file taken as described with NULL. */
  omniprof_status (*describe_file)(void *instance, uint64_t file_id, const char *path, const char *name,
                                   const void **description, char *error);

  /* Fields of 2.4 (absent, read as 0, for a plugin of an older minor). */

  /* How the host calls tick: OMNIPROF_TICK_* bits; 0 is 2.3's way. */
  uint32_t tick_flags;
};

/* tick_flags. ON_NOTICE_ONLY: tick only after a walk noted something new (at
 * once), or after the full events ring may have lost such a notice (at the
 * host's next look at BPF's counters: at once after a consume of the ring
 * large enough that it may have been full, at the latest at the round's
 * end), never on a timer alone. For a plugin whose tick only reads what its walks noted (pyperf,
 * rbperf: take_fresh): the periodic call finds nothing to do, and waking for
 * it every second was a sixth of the agent's CPU on a machine of busy
 * interpreters at 19 Hz. */
#define OMNIPROF_TICK_ON_NOTICE_ONLY (1u << 0)

typedef const struct omniprof_plugin *(*omniprof_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* OMNIPROF_PLUGIN_H */
