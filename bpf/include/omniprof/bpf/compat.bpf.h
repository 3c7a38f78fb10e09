/* Kernel-compatibility shims for omniprof's BPF objects: the only place that
 * knows about kernel versions. Everything here is CO-RE: the few kernel types
 * we touch are declared with preserve_access_index and relocated by libbpf
 * against the running kernel's BTF, so no kernel headers are needed at run
 * time and one object runs on 5.10 and on today's kernels. */
#ifndef OMNIPROF_COMPAT_BPF_H
#define OMNIPROF_COMPAT_BPF_H

#include <linux/types.h>
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

/* Only the fields we read; libbpf relocates their offsets. */
struct thread_struct {
  unsigned long fsbase; /* x86-64: the user thread pointer (glibc: its struct pthread) */
} __attribute__((preserve_access_index));

struct mm_struct {
  unsigned long end_code; /* 0 in a new mm until load_elf_binary sets it, just before the image starts */
} __attribute__((preserve_access_index));

struct task_struct {
  struct mm_struct *mm; /* NULL for kernel threads and past exit_mm */
  unsigned int flags;
  int pid;
  int tgid;
  void *stack;
  struct task_struct *group_leader;
  char comm[16];
  struct thread_struct thread;
} __attribute__((preserve_access_index));

/* The sampled thread's user thread pointer (x86-64 fs base), where thread
 * runtimes keep their thread-local data: glibc's pthread_self(), which
 * interpreters record in their thread states. */
static __always_inline __u64 omniprof_thread_pointer(void) {
  struct task_struct *task = (struct task_struct *)bpf_get_current_task();
  return BPF_CORE_READ(task, thread.fsbase);
}

#define OMNIPROF_PF_KTHREAD 0x00200000 /* include/linux/sched.h: stable since 2.6 */

/* A helper's return value as the errno it carries. Helpers are declared to
 * return long, but some kernels hand a negative errno back zero-extended from
 * 32 bits: Debian's 6.1 returns EEXIST from bpf_map_update_elem as 4294967279,
 * not -17. Only the low 32 bits are meaningful, so every comparison of a
 * helper's result with an errno, or with 0 for "failed", goes through an int:
 * omniprof_helper_errno(ret) == -EEXIST, omniprof_helper_failed(ret). Testing
 * `ret != 0` for success is safe either way. */
static __always_inline int omniprof_helper_errno(long ret) { return (int)ret; }
static __always_inline bool omniprof_helper_failed(long ret) { return (int)ret < 0; }

#define OMNIPROF_EEXIST 17 /* include/uapi/asm-generic/errno-base.h */

/* x86-64: a sample taken in user mode has the low two bits of CS set. */
static __always_inline int omniprof_regs_user_mode(const struct pt_regs *regs) {
  return (regs->cs & 3) == 3;
}

/* The user-mode registers saved at kernel entry, for a sample that landed in
 * the kernel. bpf_task_pt_regs (5.15) is used when the running kernel has it;
 * before that, the registers sit at the top of the task's kernel stack
 * (THREAD_SIZE = 16 KiB on x86-64 without KASAN). The helper check is a
 * CO-RE enum relocation: on an older kernel the branch is dead code that the
 * verifier never walks. */
#define OMNIPROF_X86_THREAD_SIZE (16384)

static __always_inline int omniprof_user_regs(struct task_struct *task, struct pt_regs *out) {
  if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs)) {
    /* bpf_task_pt_regs wants a BTF task pointer: bpf_get_current_task_btf
     * (5.11) is older than it, so it exists wherever this branch runs. The
     * kernel's pt_regs has the UAPI layout on x86-64. */
    void *regs = (void *)bpf_task_pt_regs(bpf_get_current_task_btf());
    if (!regs) return -1;
    return bpf_probe_read_kernel(out, sizeof(*out), regs);
  }
  void *stack = BPF_CORE_READ(task, stack);
  if (!stack) return -1;
  void *regs = stack + OMNIPROF_X86_THREAD_SIZE - sizeof(struct pt_regs);
  return bpf_probe_read_kernel(out, sizeof(*out), regs);
}

#endif /* OMNIPROF_COMPAT_BPF_H */
