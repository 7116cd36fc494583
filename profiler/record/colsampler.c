/* ckprof's native sampler: one thread that reads the block and host counters at absolute
 * deadlines and keeps them as int64 rows in growing buffers; Python takes the rows at flush.
 *
 * Why native (issue 14): at 10 Hz a Python sampling thread cost ~2.6 ms of CPU a second on the
 * 2-core VM, most of it waking the interpreter; this thread wakes, preads a few files through
 * descriptors kept open, parses the integers and sleeps. Nothing is converted here but text to
 * integers: units, rates and Arrow happen in bulk in Python (ckprof.record.native), with the
 * same arithmetic as the Python path, and a test holds the two to the same rows.
 *
 * Plain C with pthreads, no Python.h: loaded with ctypes, so it builds wherever a C compiler
 * does. Every function is called from one Python object (ckprof.record.native.NativeSampler).
 *
 * Sources, and the rules taken from them:
 *   /proc/diskstats   Documentation/admin-guide/iostats.rst: "major minor name" and, since 5.5,
 *                     17 counters (later kernels append more, ignored). Field 9, in_flight, is
 *                     the sum of the two counts /sys/block/<dev>/inflight splits (block/genhd.c),
 *                     so a device with in_flight 0 has "0 0" there and its file is not read.
 *   /proc/stat        proc(5): the first line, "cpu" and the aggregate times in USER_HZ ticks.
 *   /proc/meminfo     proc(5): "Key:   value kB" lines; MemTotal, MemAvailable, Dirty, Writeback.
 *   /proc/<pid>/stat  proc(5): ppid (field 4) and starttime (field 22), after the last ')'.
 *   /proc/<pid>/io    Documentation/filesystems/proc.rst: rchar, wchar, syscr, syscw,
 *                     read_bytes, write_bytes. The process tree is followed here as the Python
 *                     ProcTreeCollector does; what to make of processes that left it is decided
 *                     there, from these rows (ProcTreeCollector.fold), so that rule is in one place.
 * Both seq_file and sysfs regenerate their text on a read at offset 0, so one pread(2) per file
 * per tick replaces open+read+close.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CKP_NULL INT64_MIN /* a value the source did not give (Python: null) */
#define DISK_FIELDS 17     /* the counters of Linux 5.5+, in /proc/diskstats order */
#define BLOCK_COLS (2 + DISK_FIELDS + 2) /* t_ns, device index, 17 counters, inflight r/w */
#define CPU_FIELDS 10      /* user nice system idle iowait irq softirq steal guest guest_nice */
#define MEM_KEYS 4
#define HOST_COLS (1 + CPU_FIELDS + MEM_KEYS)
#define IO_FIELDS 6        /* rchar wchar syscr syscw read_bytes write_bytes */
#define PROC_COLS (5 + IO_FIELDS) /* t_ns, pid (-1: the tick's first row), starttime, ppid, member, io */
#define MAX_DEVICES 4096

static const char *const MEM_NAMES[MEM_KEYS] = {"MemTotal", "MemAvailable", "Dirty", "Writeback"};

enum { BLOCK = 0, HOST = 1, PROC = 2, SECTIONS = 3 };
static const char *const IO_NAMES[IO_FIELDS] = {"rchar", "wchar", "syscr", "syscw", "read_bytes", "write_bytes"};

/* A file re-read through a descriptor kept open (reopened after an error). */
struct file {
  char *path;
  int fd;
};

/* One section's rows: appended by the sampler a tick at a time, taken by Python at flush. */
struct rows {
  size_t ncols, max_tick; /* columns a row; room for rows in `tick` */
  int64_t *data;
  size_t n, cap;
  int64_t *tick; /* this tick's rows, being made */
  int64_t samples, errors, first_errno;
};

/* A set of pids: sorted, searched by bisection. */
struct pids {
  int *pid;
  size_t n, cap;
};

/* One /proc/<pid>/stat read this tick. */
struct proc_stat {
  int pid, ppid, member;
  int64_t start;
};

struct ckp_sampler {
  int64_t period_ns;
  int ndev;                /* block section: devices, 0 when it is off */
  char **dev_names;
  size_t *dev_name_len;
  struct file diskstats;
  struct file *inflight;
  int *line_of;            /* each device's line in the last /proc/diskstats reading, or -1 */
  char **lines;
  int lines_cap;
  int host;                /* host section: on or off */
  struct file stat, meminfo;
  int cpu_fields;          /* how many of the "cpu" line's times to keep (psutil's, in order) */
  char *buf;               /* read buffer, grown when a file fills it */
  size_t buf_cap;
  int proc;               /* process-tree section: on or off */
  char *proc_root;
  int64_t root_pid;        /* the wrapped command's pid, set from Python once it runs; -1 before */
  int64_t proc_every, ticks; /* sample the tree every proc_every ticks */
  int proc_dir;
  struct pids listed, tree; /* last time: the pids /proc listed, the tree's */
  struct proc_stat *stats;
  size_t n_stats, cap_stats;
  struct rows rows[SECTIONS];
  int64_t skipped_ticks, thread_cpu_ns;
  pthread_t thread;
  int running, stop;
  pthread_mutex_t mu;      /* guards rows, counters and stop */
  pthread_cond_t cv;
};

static int64_t now_ns(clockid_t clk) {
  struct timespec t;
  clock_gettime(clk, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* pread the whole file at offset 0 into s->buf, NUL-terminated: its length, or -errno. */
static long read_file(struct ckp_sampler *s, struct file *f) {
  if (f->fd < 0 && (f->fd = open(f->path, O_RDONLY | O_CLOEXEC)) < 0) return -errno;
  for (;;) {
    ssize_t n = pread(f->fd, s->buf, s->buf_cap - 1, 0);
    if (n < 0) {
      int e = errno;
      close(f->fd); /* the device went away: reopen next time */
      f->fd = -1;
      return -e;
    }
    if ((size_t)n < s->buf_cap - 1) {
      s->buf[n] = '\0';
      return n;
    }
    char *bigger = realloc(s->buf, s->buf_cap * 2); /* the file filled it: ask again, larger */
    if (!bigger) return -ENOMEM;
    s->buf = bigger;
    s->buf_cap *= 2;
  }
}

/* Up to `max` decimal integers (a '-' allowed: /proc/<pid>/stat's nice, tpgid) from p, space or
 * tab separated, to the end of the line; how many, or -1 where a token is not an integer. */
static int parse_ints(const char *p, int64_t *out, int max) {
  int n = 0;
  while (n < max) {
    while (*p == ' ' || *p == '\t') p++;
    int neg = *p == '-';
    if (p[neg] < '0' || p[neg] > '9') break;
    p += neg;
    int64_t v = 0;
    while (*p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
    if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\0') return -1;
    out[n++] = neg ? -v : v;
  }
  return n;
}

static void note_error(struct ckp_sampler *s, int section, int err) {
  pthread_mutex_lock(&s->mu);
  s->rows[section].errors++;
  if (!s->rows[section].first_errno) s->rows[section].first_errno = err;
  pthread_mutex_unlock(&s->mu);
}

/* The tick's n rows (in r->tick) appended: one sample. */
static void commit(struct ckp_sampler *s, int section, size_t n) {
  struct rows *r = &s->rows[section];
  pthread_mutex_lock(&s->mu);
  if (r->n + n > r->cap) {
    size_t cap = r->cap ? r->cap : 1024;
    while (cap < r->n + n) cap *= 2;
    int64_t *bigger = realloc(r->data, cap * r->ncols * sizeof *bigger);
    if (!bigger) {
      pthread_mutex_unlock(&s->mu);
      note_error(s, section, ENOMEM);
      return;
    }
    r->data = bigger;
    r->cap = cap;
  }
  memcpy(r->data + r->n * r->ncols, r->tick, n * r->ncols * sizeof *r->tick);
  r->n += n;
  r->samples++;
  pthread_mutex_unlock(&s->mu);
}

/* Split s->buf into lines, in place. */
static int split_lines(struct ckp_sampler *s) {
  int n = 0;
  for (char *p = s->buf; *p;) {
    if (n == s->lines_cap) {
      char **bigger = realloc(s->lines, (s->lines_cap ? s->lines_cap * 2 : 256) * sizeof *bigger);
      if (!bigger) break;
      s->lines = bigger;
      s->lines_cap = s->lines_cap ? s->lines_cap * 2 : 256;
    }
    s->lines[n++] = p;
    char *nl = strchr(p, '\n');
    if (!nl) break;
    p = nl + 1;
  }
  return n;
}

/* Where a /proc/diskstats line's name starts: after "major minor". */
static const char *name_of_line(const char *p) {
  for (int tok = 0; tok < 2; tok++) {
    while (*p == ' ') p++;
    while (*p >= '0' && *p <= '9') p++;
  }
  while (*p == ' ') p++;
  return p;
}

static int is_device(struct ckp_sampler *s, int d, const char *name) {
  return !strncmp(name, s->dev_names[d], s->dev_name_len[d]) && name[s->dev_name_len[d]] == ' ';
}

static void find_lines(struct ckp_sampler *s, int nlines) {
  for (int d = 0; d < s->ndev; d++) s->line_of[d] = -1;
  for (int k = 0; k < nlines; k++) {
    const char *name = name_of_line(s->lines[k]);
    for (int d = 0; d < s->ndev; d++)
      if (is_device(s, d, name)) s->line_of[d] = k;
  }
}

/* Each device's in_flight split: "reads writes" from /sys/block/<dev>/inflight, NULL when unread. */
static void read_inflight(struct file *f, int64_t *rw) {
  char text[64];
  ssize_t n = -1;
  if (f->fd >= 0 || (f->fd = open(f->path, O_RDONLY | O_CLOEXEC)) >= 0) n = pread(f->fd, text, sizeof text - 1, 0);
  if (n < 0 && f->fd >= 0) {
    close(f->fd);
    f->fd = -1;
  }
  if (n >= 0) text[n] = '\0';
  if (n < 0 || (size_t)n == sizeof text - 1 || parse_ints(text, rw, 2) != 2) rw[0] = rw[1] = CKP_NULL;
}

static void sample_block(struct ckp_sampler *s) {
  struct rows *r = &s->rows[BLOCK];
  int64_t t = now_ns(CLOCK_MONOTONIC);
  long len = read_file(s, &s->diskstats);
  if (len < 0) {
    note_error(s, BLOCK, (int)-len);
    return;
  }
  int nlines = split_lines(s);
  size_t n = 0;
  for (int attempt = 0; attempt < 2; attempt++) {
    int moved = 0;
    n = 0;
    for (int d = 0; d < s->ndev; d++) {
      int64_t *row = r->tick + n * r->ncols;
      int k = s->line_of[d];
      if (k < 0 || k >= nlines || !is_device(s, d, name_of_line(s->lines[k])) ||
          parse_ints(name_of_line(s->lines[k]) + s->dev_name_len[d], row + 2, DISK_FIELDS) != DISK_FIELDS) {
        moved = 1; /* not where it was (a device came or went), or gone: no row, as in Python */
        continue;
      }
      row[0] = t;
      row[1] = d;
      if (row[2 + 8] == 0) /* in_flight 0: both counts are 0 at this reading */
        row[2 + DISK_FIELDS] = row[2 + DISK_FIELDS + 1] = 0;
      else
        read_inflight(&s->inflight[d], row + 2 + DISK_FIELDS);
      n++;
    }
    if (!moved) break;
    if (attempt == 0) find_lines(s, nlines);
  }
  commit(s, BLOCK, n);
}

/* A "Key:   value [kB]" line of /proc/meminfo: the value in bytes, or -1 (Python: _MEMINFO_RE). */
static int64_t meminfo_value(const char *p) {
  while (*p == ' ' || *p == '\t') p++;
  if (*p < '0' || *p > '9') return -1;
  int64_t v = 0;
  while (*p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
  if (*p != ' ' && *p != '\t') return v;
  while (*p == ' ' || *p == '\t') p++;
  int kb = p[0] == 'k' && p[1] == 'B' && (p[2] == '\0' || p[2] == '\n' || p[2] == ' ' || p[2] == '\t' || p[2] == '\r');
  return kb ? v * 1024 : v;
}

static void sample_host(struct ckp_sampler *s) {
  struct rows *r = &s->rows[HOST];
  int64_t *row = r->tick;
  row[0] = now_ns(CLOCK_MONOTONIC);
  long len = read_file(s, &s->stat);
  if (len < 0) {
    note_error(s, HOST, (int)-len);
    return;
  }
  for (int i = 0; i < CPU_FIELDS; i++) row[1 + i] = CKP_NULL;
  if (!strncmp(s->buf, "cpu ", 4)) {
    int64_t v[CPU_FIELDS];
    int n = parse_ints(s->buf + 3, v, s->cpu_fields);
    for (int i = 0; i < n; i++) row[1 + i] = v[i];
  }
  len = read_file(s, &s->meminfo);
  if (len < 0) {
    note_error(s, HOST, (int)-len);
    return;
  }
  for (int i = 0; i < MEM_KEYS; i++) row[1 + CPU_FIELDS + i] = CKP_NULL;
  int nlines = split_lines(s);
  for (int k = 0; k < nlines; k++)
    for (int i = 0; i < MEM_KEYS; i++) {
      size_t m = strlen(MEM_NAMES[i]);
      if (!strncmp(s->lines[k], MEM_NAMES[i], m) && s->lines[k][m] == ':') {
        int64_t v = meminfo_value(s->lines[k] + m + 1);
        if (v >= 0) row[1 + CPU_FIELDS + i] = v;
      }
    }
  commit(s, HOST, 1);
}

/* -- the process tree ------------------------------------------------------------------------ */

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

static int has(const struct pids *p, int pid) {
  return p->n && bsearch(&pid, p->pid, p->n, sizeof *p->pid, cmp_int) != NULL;
}

static int add_pid(struct pids *p, int pid) {
  if (p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 256;
    int *bigger = realloc(p->pid, cap * sizeof *bigger);
    if (!bigger) return -ENOMEM;
    p->pid = bigger;
    p->cap = cap;
  }
  p->pid[p->n++] = pid;
  return 0;
}

/* The numeric entries of /proc, sorted. */
static int list_pids(struct ckp_sampler *s, struct pids *out) {
  out->n = 0;
  if (s->proc_dir < 0 && (s->proc_dir = open(s->proc_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) return -errno;
  lseek(s->proc_dir, 0, SEEK_SET);
  char dents[32768];
  for (;;) {
    long n = syscall(SYS_getdents64, s->proc_dir, dents, sizeof dents);
    if (n < 0) return -errno;
    if (n == 0) break;
    for (long off = 0; off < n;) {
      struct linux_dirent64 {
        uint64_t d_ino;
        int64_t d_off;
        unsigned short d_reclen;
        unsigned char d_type;
        char d_name[];
      } *d = (void *)(dents + off);
      const char *c = d->d_name;
      int pid = 0;
      while (*c >= '0' && *c <= '9') pid = pid * 10 + (*c++ - '0');
      if (!*c && c != d->d_name && add_pid(out, pid)) return -ENOMEM;
      off += d->d_reclen;
    }
  }
  qsort(out->pid, out->n, sizeof *out->pid, cmp_int);
  return 0;
}

/* A small /proc/<pid>/<name> file into text (NUL-terminated); its length or -1. */
static long read_pid_file(struct ckp_sampler *s, int pid, const char *name, char *text, size_t cap) {
  char path[256];
  snprintf(path, sizeof path, "%s/%d/%s", s->proc_root, pid, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, text, cap - 1);
  close(fd);
  if (n < 0) return -1;
  text[n] = '\0';
  return n;
}

/* (ppid, starttime) from /proc/<pid>/stat: the command (field 2) may hold spaces and ')', so
 * the fields are counted after the last ')'; 0, or -1 when gone or not understood. */
static int read_stat(struct ckp_sampler *s, int pid, struct proc_stat *out) {
  char text[1024];
  if (read_pid_file(s, pid, "stat", text, sizeof text) < 0) return -1;
  char *p = strrchr(text, ')');
  if (!p) return -1;
  p += 2; /* ") " */
  int64_t v[20];
  while (*p && *p != ' ') p++; /* field 3, the state, is a letter */
  if (parse_ints(p, v, 19) != 19) return -1; /* fields 4..22 */
  out->pid = pid;
  out->ppid = (int)v[0];
  out->start = v[18];
  out->member = 0;
  return 0;
}

/* The six counters of /proc/<pid>/io, all of them, or -1 (Python's read_io: unexpected contents). */
static int read_io(struct ckp_sampler *s, int pid, int64_t *io) {
  char text[1024];
  if (read_pid_file(s, pid, "io", text, sizeof text) < 0) return -1;
  int found = 0;
  for (char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
    for (int i = 0; i < IO_FIELDS; i++) {
      size_t m = strlen(IO_NAMES[i]);
      if (!strncmp(line, IO_NAMES[i], m) && line[m] == ':' && parse_ints(line + m + 1, &io[i], 1) == 1)
        found |= 1 << i;
    }
  return found == (1 << IO_FIELDS) - 1 ? 0 : -1;
}

static struct proc_stat *find_stat(struct ckp_sampler *s, int pid) {
  for (size_t i = 0; i < s->n_stats; i++)
    if (s->stats[i].pid == pid) return &s->stats[i];
  return NULL;
}

/* The tree now: the root and its descendants by current ppid, looking only at the pids that were
 * in the tree last time and those /proc did not list last time (a process outside the tree
 * cannot join it). Rows: the tick's (pid -1), then each member with its io (NULL where
 * unreadable), then each of last time's members no longer in it, with its stat (ProcTreeCollector). */
static void sample_proc(struct ckp_sampler *s) {
  struct rows *r = &s->rows[PROC];
  int64_t t = now_ns(CLOCK_MONOTONIC), root = __atomic_load_n(&s->root_pid, __ATOMIC_RELAXED);
  if (root < 0) {
    commit(s, PROC, 0);
    return;
  }
  struct pids listed = {0};
  int err = list_pids(s, &listed);
  if (err) {
    free(listed.pid);
    note_error(s, PROC, -err);
    return;
  }
  s->n_stats = 0;
  for (size_t i = 0; i < listed.n; i++) {
    int pid = listed.pid[i];
    if (!(pid == root || has(&s->tree, pid) || !has(&s->listed, pid))) continue;
    if (s->n_stats == s->cap_stats) {
      size_t cap = s->cap_stats ? s->cap_stats * 2 : 64;
      struct proc_stat *bigger = realloc(s->stats, cap * sizeof *bigger);
      if (!bigger) break;
      s->stats = bigger;
      s->cap_stats = cap;
    }
    if (!read_stat(s, pid, &s->stats[s->n_stats])) s->n_stats++;
  }
  free(s->listed.pid);
  s->listed = listed;
  /* breadth first from the root, by ppid */
  struct pids tree = {0};
  struct proc_stat *rs = find_stat(s, (int)root);
  if (rs) {
    rs->member = 1;
    add_pid(&tree, rs->pid);
    for (size_t q = 0; q < tree.n; q++)
      for (size_t i = 0; i < s->n_stats; i++)
        if (!s->stats[i].member && s->stats[i].ppid == tree.pid[q]) {
          s->stats[i].member = 1;
          add_pid(&tree, s->stats[i].pid);
        }
  }
  size_t n = 0, need = 1 + s->n_stats;
  if (need > r->max_tick) {
    int64_t *bigger = realloc(r->tick, need * r->ncols * sizeof *bigger);
    if (!bigger) {
      free(tree.pid);
      note_error(s, PROC, ENOMEM);
      return;
    }
    r->tick = bigger;
    r->max_tick = need;
  }
  int64_t *row = r->tick;
  for (size_t j = 0; j < r->ncols; j++) row[j] = CKP_NULL;
  row[0] = t;
  row[1] = -1;
  n++;
  for (size_t i = 0; i < s->n_stats; i++) {
    struct proc_stat *ps = &s->stats[i];
    if (!ps->member && !has(&s->tree, ps->pid)) continue;
    row = r->tick + n++ * r->ncols;
    row[0] = t;
    row[1] = ps->pid;
    row[2] = ps->start;
    row[3] = ps->ppid;
    row[4] = ps->member;
    if (!ps->member || read_io(s, ps->pid, row + 5))
      for (int j = 0; j < IO_FIELDS; j++) row[5 + j] = CKP_NULL;
  }
  qsort(tree.pid, tree.n, sizeof *tree.pid, cmp_int);
  free(s->tree.pid);
  s->tree = tree;
  commit(s, PROC, n);
}

/* One tick: each section in turn (the tree every proc_every ticks, or now with `all`). No CPU
 * clock is read here: on the VM it was measured on, each clock_gettime(CLOCK_THREAD_CPUTIME_ID)
 * cost ~15 µs, and three a tick were half the cost of the reads. The thread's CPU time is read
 * once, when it ends. */
static void tick(struct ckp_sampler *s, int all) {
  if (s->ndev) sample_block(s);
  if (s->host) sample_host(s);
  if (s->proc && (s->ticks++ % s->proc_every == 0 || all)) sample_proc(s);
}

/* One sample of every section now, on the caller's thread (the recording's last, after stop). */
void ckp_tick(struct ckp_sampler *s) { tick(s, 1); }

/* Absolute deadlines start + k·period; a tick already past when the previous sample returns is
 * skipped and counted, not queued (the Python recorder's rule, ckprof/record/recorder.py). */
static void *run(void *arg) {
  struct ckp_sampler *s = arg;
  int64_t start = now_ns(CLOCK_MONOTONIC), k = 0;
  pthread_mutex_lock(&s->mu);
  while (!s->stop) {
    pthread_mutex_unlock(&s->mu);
    tick(s, 0);
    k++;
    int64_t deadline = start + k * s->period_ns, now = now_ns(CLOCK_MONOTONIC);
    pthread_mutex_lock(&s->mu);
    if (now > deadline) {
      int64_t missed = (now - deadline) / s->period_ns + 1;
      s->skipped_ticks += missed;
      k += missed;
      deadline = start + k * s->period_ns;
    }
    struct timespec ts = {deadline / 1000000000, deadline % 1000000000};
    while (!s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &ts) != ETIMEDOUT) {
    }
  }
  s->thread_cpu_ns = now_ns(CLOCK_THREAD_CPUTIME_ID);
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static int init_rows(struct rows *r, size_t ncols, size_t max_tick) {
  r->ncols = ncols;
  r->max_tick = max_tick;
  r->tick = calloc(max_tick * ncols, sizeof *r->tick);
  return r->tick ? 0 : -ENOMEM;
}

struct ckp_sampler *ckp_new(int64_t period_ns) {
  struct ckp_sampler *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->period_ns = period_ns;
  s->buf_cap = 65536;
  s->buf = malloc(s->buf_cap);
  s->diskstats.fd = s->stat.fd = s->meminfo.fd = s->proc_dir = -1;
  s->root_pid = -1;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&s->mu, NULL);
  if (!s->buf || init_rows(&s->rows[HOST], HOST_COLS, 1) || init_rows(&s->rows[PROC], PROC_COLS, 64)) return NULL;
  return s;
}

/* The block section: /proc/diskstats' path, the devices, each one's inflight file. */
int ckp_set_block(struct ckp_sampler *s, const char *diskstats, int ndev, const char *const *names,
                  const char *const *inflight) {
  if (ndev < 1 || ndev > MAX_DEVICES) return -EINVAL;
  s->dev_names = calloc(ndev, sizeof *s->dev_names);
  s->dev_name_len = calloc(ndev, sizeof *s->dev_name_len);
  s->inflight = calloc(ndev, sizeof *s->inflight);
  s->line_of = calloc(ndev, sizeof *s->line_of);
  if (!s->dev_names || !s->dev_name_len || !s->inflight || !s->line_of) return -ENOMEM;
  for (int d = 0; d < ndev; d++) {
    s->dev_names[d] = strdup(names[d]);
    s->dev_name_len[d] = strlen(names[d]);
    s->inflight[d] = (struct file){strdup(inflight[d]), -1};
    s->line_of[d] = -1;
  }
  s->diskstats.path = strdup(diskstats);
  s->ndev = ndev;
  return init_rows(&s->rows[BLOCK], BLOCK_COLS, ndev);
}

/* The host section: /proc/stat, /proc/meminfo, and how many cpu times to keep (≤ 10). */
int ckp_set_host(struct ckp_sampler *s, const char *stat, const char *meminfo, int cpu_fields) {
  if (cpu_fields < 4 || cpu_fields > CPU_FIELDS) return -EINVAL;
  s->stat.path = strdup(stat);
  s->meminfo.path = strdup(meminfo);
  s->cpu_fields = cpu_fields;
  s->host = 1;
  return 0;
}

/* The process-tree section: the /proc to read, a sample every `every` ticks. */
int ckp_set_proc(struct ckp_sampler *s, const char *proc_root, int64_t every) {
  if (every < 1) return -EINVAL;
  s->proc_root = strdup(proc_root);
  s->proc_every = every;
  s->proc = 1;
  return 0;
}

/* The wrapped command's pid, once it runs: the tree's root from the next sample on. */
void ckp_set_root(struct ckp_sampler *s, int64_t pid) { __atomic_store_n(&s->root_pid, pid, __ATOMIC_RELAXED); }

int ckp_start(struct ckp_sampler *s) {
  int err = pthread_create(&s->thread, NULL, run, s);
  s->running = !err;
  return -err;
}

void ckp_stop(struct ckp_sampler *s) {
  if (!s->running) return;
  pthread_mutex_lock(&s->mu);
  s->stop = 1;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->thread, NULL);
  s->running = 0;
}

size_t ckp_columns(int section) { return section == BLOCK ? BLOCK_COLS : section == HOST ? HOST_COLS : PROC_COLS; }
int64_t ckp_null(void) { return CKP_NULL; }

size_t ckp_pending(struct ckp_sampler *s, int section) {
  pthread_mutex_lock(&s->mu);
  size_t n = s->rows[section].n;
  pthread_mutex_unlock(&s->mu);
  return n;
}

/* Up to max_rows of the section's rows, oldest first, moved into out; how many. */
size_t ckp_take(struct ckp_sampler *s, int section, int64_t *out, size_t max_rows) {
  struct rows *r = &s->rows[section];
  pthread_mutex_lock(&s->mu);
  size_t n = r->n < max_rows ? r->n : max_rows;
  memcpy(out, r->data, n * r->ncols * sizeof *out);
  memmove(r->data, r->data + n * r->ncols, (r->n - n) * r->ncols * sizeof *out);
  r->n -= n;
  pthread_mutex_unlock(&s->mu);
  return n;
}

/* samples, errors, first errno of the section; skipped ticks; the thread's CPU ns (once it ended). */
void ckp_counts(struct ckp_sampler *s, int section, int64_t *out) {
  struct rows *r = &s->rows[section];
  pthread_mutex_lock(&s->mu);
  out[0] = r->samples;
  out[1] = r->errors;
  out[2] = r->first_errno;
  out[3] = s->skipped_ticks;
  out[4] = s->thread_cpu_ns;
  pthread_mutex_unlock(&s->mu);
}

static void close_file(struct file *f) {
  if (f->fd >= 0) close(f->fd);
  free(f->path);
}

void ckp_free(struct ckp_sampler *s) {
  if (!s) return;
  ckp_stop(s);
  for (int d = 0; d < s->ndev; d++) {
    free(s->dev_names[d]);
    close_file(&s->inflight[d]);
  }
  free(s->dev_names);
  free(s->dev_name_len);
  free(s->inflight);
  free(s->line_of);
  free(s->lines);
  close_file(&s->diskstats);
  close_file(&s->stat);
  close_file(&s->meminfo);
  for (int i = 0; i < SECTIONS; i++) {
    free(s->rows[i].data);
    free(s->rows[i].tick);
  }
  free(s->proc_root);
  free(s->listed.pid);
  free(s->tree.pid);
  free(s->stats);
  if (s->proc_dir >= 0) close(s->proc_dir);
  free(s->buf);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s);
}
