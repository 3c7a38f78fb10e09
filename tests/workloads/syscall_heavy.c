/* Workload for end-to-end tests: spends its time in the kernel (reading
 * /dev/zero copies zeroes into user memory), called from a known user chain
 * main -> read_loop. Runs for argv[1] seconds (default 10).
 *
 * read_loop issues the system call itself rather than through libc's read():
 * Debian's libc has no frame pointers, so a frame-pointer walk starting in
 * read() would skip read_loop. With the syscall inline, the user stack the
 * kernel saved starts in read_loop, whose frame is intact. */
#include <fcntl.h>
#include <sys/syscall.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "workload.h"

static char buffer[1 << 20];

__attribute__((noinline)) void read_loop(int fd, double end) {
  while (now_seconds() < end) {
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"((long)SYS_read), "D"((long)fd), "S"(buffer), "d"(sizeof(buffer))
                     : "rcx", "r11", "memory");
    if (ret < 0) exit(1);
  }
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 10;
  int fd = open("/dev/zero", O_RDONLY);
  if (fd < 0) return 1;
  read_loop(fd, now_seconds() + seconds);
  return 0;
}
