/* The floor of any sampler on this machine, for benchmarks/recorder_process_cpu.py: at HZ for SECONDS,
   pread(2) the files ckprof's block and host collectors read (given as arguments: /proc/diskstats,
   each device's /sys/block/<dev>/inflight, /proc/stat, /proc/meminfo) through descriptors kept open,
   sleeping to absolute deadlines with clock_nanosleep(2). Nothing is parsed or kept: this is what
   reading the counters costs at all. Prints the CPU seconds (user + system) spent after the first
   second, and the seconds that covers.

   cc -O2 -o sampler_floor sampler_floor.c && ./sampler_floor HZ SECONDS FILE... */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 16];

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s HZ SECONDS FILE...\n", argv[0]);
    return 2;
  }
  int hz = atoi(argv[1]), nfd = argc - 3;
  double secs = atof(argv[2]), cpu0 = 0;
  int *fds = calloc(nfd, sizeof *fds);
  for (int i = 0; i < nfd; i++)
    if ((fds[i] = open(argv[3 + i], O_RDONLY | O_CLOEXEC)) < 0) {
      perror(argv[3 + i]);
      return 1;
    }
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  long period_ns = 1000000000L / hz, ticks = (long)(secs * hz);
  for (long k = 0; k < ticks; k++) {
    if (k == hz) cpu0 = cpu_s(); /* after the first second: start-up left out */
    for (int i = 0; i < nfd; i++) pread(fds[i], buf, sizeof buf, 0);
    t.tv_nsec += period_ns;
    while (t.tv_nsec >= 1000000000L) t.tv_nsec -= 1000000000L, t.tv_sec++;
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
  }
  printf("%.6f %.3f\n", cpu_s() - cpu0, secs - 1.0);
  return 0;
}
