/* CRuby embedded in a C program (linked with libruby-3.1): the program's own
 * C frames (main -> run_embedded_ruby) hold the VM, which runs
 * Embedded#spin under Embedded#run for SECONDS.
 *
 *   embed_ruby SECONDS */
#include <ruby.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const kScript =
    "class Embedded\n"
    "  def spin(n)\n"
    "    total = 0\n"
    "    i = 0\n"
    "    while i < n\n"
    "      total += i & 7\n"
    "      i += 1\n"
    "    end\n"
    "    total\n"
    "  end\n"
    "\n"
    "  def run(seconds)\n"
    "    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds\n"
    "    spin(20_000) while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline\n"
    "  end\n"
    "end\n";

static VALUE run_for(VALUE seconds) {
  VALUE embedded = rb_funcall(rb_const_get(rb_cObject, rb_intern("Embedded")), rb_intern("new"), 0);
  return rb_funcall(embedded, rb_intern("run"), 1, seconds);
}

/* Not inlined: its frame stands between main and the VM in every sample.
 * Everything under rb_protect: an exception (SIGTERM is one) must not
 * unwind past the VM's first frame. */
__attribute__((noinline)) static int run_embedded_ruby(double seconds) {
  int state = 0;
  rb_eval_string_protect(kScript, &state);
  if (state) return state;
  rb_protect(run_for, DBL2NUM(seconds), &state);
  return state;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 10;
  ruby_init();
  int state = run_embedded_ruby(seconds);
  if (state) fprintf(stderr, "embed_ruby: the script raised (or was interrupted)\n");
  return ruby_cleanup(state);
}
