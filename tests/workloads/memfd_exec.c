/* Runs a program from an anonymous file, as packed binaries and some JITs
 * do: copies argv[1] into memfd_create("omniprof-memfd") and fexecve()s it
 * with argv[1..]. Its mappings then read "/memfd:omniprof-memfd (deleted)":
 * no path on disk reaches them, only /proc/PID/map_files. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PROGRAM [ARGS...]\n", argv[0]);
    return 2;
  }
  int in = open(argv[1], O_RDONLY | O_CLOEXEC);
  int memfd = memfd_create("omniprof-memfd", MFD_CLOEXEC);
  if (in < 0 || memfd < 0) {
    perror(argv[1]);
    return 1;
  }
  char buffer[1 << 16];
  ssize_t n;
  while ((n = read(in, buffer, sizeof(buffer))) > 0) {
    if (write(memfd, buffer, (size_t)n) != n) {
      perror("write");
      return 1;
    }
  }
  close(in);
  fexecve(memfd, argv + 1, environ);
  perror("fexecve");
  return 1;
}
