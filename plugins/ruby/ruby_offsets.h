/* CRuby layout facts the rbperf BPF walk reads (one entry per supported
 * minor version in the ruby_offsets map, written by the plugin from
 * offsets/ruby.yaml). Shared by rbperf.bpf.c and the plugin's user space. */
#ifndef OMNIPROF_RUBY_OFFSETS_H
#define OMNIPROF_RUBY_OFFSETS_H

#include "omniprof/bpf/abi.h"

#define RUBY_OFFSET_NONE 0xffff
#define RUBY_MAX_VERSIONS 16

/* Where the sampled thread's rb_execution_context_t is (process_info
 * interpreter_data[RBPERF_DATA_EC_MODEL]). */
enum ruby_ec_model {
  /* 3.0.4+ (and 3.1+): the thread-local `ruby_current_ec` of libruby (or
   * the ruby executable), reached through the thread's DTV: general and
   * local dynamic TLS (R_X86_64_DTPMOD64/DTPOFF64), what libruby.so uses,
   * and a TLS descriptor the loader bound to dynamic TLS.
   * EC_A = the module id, EC_B = the variable's offset in the block. */
  RUBY_EC_TLS_DTV = 1,
  /* The same variable at a fixed offset from the thread pointer: static
   * TLS (initial-exec R_X86_64_TPOFF64, a TLS descriptor bound to static
   * TLS, or a ruby executable's own local-exec TLS). EC_A = that offset
   * (signed, as u64). */
  RUBY_EC_TLS_TP_OFFSET = 2,
  /* 2.6, 2.7: the global `ruby_current_execution_context_ptr`, the EC of
   * the thread that holds the GVL. EC_A = its address. */
  RUBY_EC_GLOBAL_POINTER = 3,
  /* 3.0.0 to 3.0.3: `ruby_single_main_ractor` -> threads.running_ec (the
   * GVL holder's). EC_A = the address of the pointer to the ractor. */
  RUBY_EC_MAIN_RACTOR = 4,
};

/* rb_control_frame_t's ep[0] (VM_ENV_DATA_INDEX_FLAGS) and the frame magic
 * (vm_core.h, the same values from 2.6 to 3.4). */
#define RUBY_VM_FRAME_MAGIC_MASK 0x7fff0001u
#define RUBY_VM_FRAME_MAGIC_CFUNC 0x55550001u
#define RUBY_VM_FRAME_FLAG_FINISH 0x0020u
#define RUBY_VM_ENV_FLAG_LOCAL 0x0002u
/* ep[-1] (VM_ENV_DATA_INDEX_SPECVAL) of a non-local env: the previous ep,
 * tagged (VM_TAGGED_PTR_REF strips the low two bits); ep[-2]
 * (VM_ENV_DATA_INDEX_ME_CREF): the method entry or cref. */
#define RUBY_VM_ENV_INDEX_SPECVAL (-1)
#define RUBY_VM_ENV_INDEX_ME_CREF (-2)

struct ruby_offsets {
  omniprof_u32 version;       /* major << 16 | minor << 8: 0 = no entry */
  omniprof_u16 ec_vm_stack;   /* rb_execution_context_t.vm_stack */
  omniprof_u16 ec_vm_stack_size; /* .vm_stack_size (in VALUEs) */
  omniprof_u16 ec_cfp;        /* .cfp: the innermost control frame */
  omniprof_u16 control_frame_size; /* sizeof(rb_control_frame_t) */
  omniprof_u16 cfp_pc;        /* rb_control_frame_t.pc */
  omniprof_u16 cfp_iseq;      /* .iseq */
  omniprof_u16 cfp_ep;        /* .ep */
  omniprof_u16 ractor_running_ec; /* rb_ractor_t.threads.running_ec (3.0 without TLS), else NONE */
  /* The global EC models name the GVL holder's EC, which is not the sampled
   * thread's when that one runs without the GVL: the walk checks
   * ec->thread_ptr->thread_id (pthread_self() of its thread, the fs base on
   * x86-64 glibc). NONE with the TLS model, where the EC is the thread's own. */
  omniprof_u16 ec_thread_ptr;     /* rb_execution_context_t.thread_ptr */
  omniprof_u16 thread_native_id;  /* rb_thread_t.thread_id */
};

#endif /* OMNIPROF_RUBY_OFFSETS_H */
