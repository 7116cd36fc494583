/* ckprof's fanotify reader: reads a fanotify(7) group's events, keeps each file's burst of
 * activity, and hands Python only the finished bursts, each file's `file_activity` entry already
 * encoded as JSON, in batches (one line a batch for the recording's writer).
 *
 * Why native (issue 21): at 3,300 new small files a second the Python reader spent ~22 µs a
 * file (parsing the info records, building the path, the burst's bookkeeping, statx through
 * ctypes) — ~5 % of a core against the 2 % asked at 10,000 file events a second. Here the usual
 * event — one FAN_EVENT_INFO_TYPE_DFID_NAME record, a file's create / modify / close_write /
 * delete, by a process Python has said is the recorded tree's, in a directory Python has said is
 * wholly under the recorded paths — costs a hash lookup and a few stores; statx(2) of the
 * finished file is done here too, within the size budget Python sets (fr_set_size_budget: in a
 * flood past it a file's size is left unknown, and says why).
 *
 * Every rule with a judgement in it stays in Python (ckprof.record.fileactivity): which pids are
 * the tree's (the proc connector), which directories are under the paths and not excluded, what a
 * directory made, renamed or deleted does to the marks, queue overflows, the process
 * descriptions. An event this reader cannot take whole is handed back (fr_take returns 1 with the
 * event's offset and length) and Python decides, calling fr_note / fr_rename for the burst
 * table, which is only here: one table, so the order of events is kept whichever side took them.
 *
 * Sources: fanotify(7) (struct fanotify_event_metadata, struct fanotify_event_info_fid: header,
 * fsid, then struct file_handle and, for *_NAME records, a NUL-terminated name); statx(2)
 * (STATX_BTIME: the inode's birth time where the file system keeps one).
 *
 * Beside each batch's JSON it lists, where Python asked (fr_set_list), the paths of the batch's
 * entries the file tracker watches (fr_paths): the tracker takes them in-process instead of parsing
 * the batch's line back from events.jsonl (issue 21, cost; record/filetracker.py says which).
 *
 * Plain C, no Python.h: loaded with ctypes (ckprof.record.fanreader). One thread calls it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FR_ABI 4 /* Python checks it: a library built from another fanreader.c is not used */

/* <linux/fanotify.h> */
#define FAN_MODIFY 0x2u
#define FAN_CLOSE_WRITE 0x8u
#define FAN_MOVED_FROM 0x40u
#define FAN_MOVED_TO 0x80u
#define FAN_CREATE 0x100u
#define FAN_DELETE 0x200u
#define FAN_DELETE_SELF 0x400u
#define FAN_MOVE_SELF 0x800u
#define FAN_Q_OVERFLOW 0x4000u
#define FAN_RENAME 0x10000000u
#define FAN_ONDIR 0x40000000u
#define FAN_EVENT_INFO_TYPE_DFID_NAME 2
#define FAN_METADATA_VERSION 3
#define META_LEN 24 /* struct fanotify_event_metadata */
/* more than the longest event this group can be given: the metadata and at most two DFID_NAME
 * records (FAN_RENAME's old and new), each a header, fsid, a struct file_handle of at most
 * MAX_HANDLE_SZ (128) bytes and a name of at most NAME_MAX (255) bytes and its NUL */
#define EVENT_MAX_LEN 4096

#define WRITE_MASK (FAN_CREATE | FAN_MODIFY | FAN_CLOSE_WRITE)
#define ENDS_MASK (FAN_DELETE | FAN_MOVED_FROM | FAN_CLOSE_WRITE) /* what ends a file's burst */
/* what makes an event Python's to judge */
#define SLOW_MASK (FAN_Q_OVERFLOW | FAN_ONDIR | FAN_DELETE_SELF | FAN_MOVE_SELF | FAN_RENAME | FAN_MOVED_FROM | FAN_MOVED_TO)

#define SCAN_TAG 0xFFFFu /* a key's handle length for a burst found by a listing, keyed by path */

/* ---- a chained hash map, keys are bytes ---------------------------------------------------- */
struct node {
  struct node *next;
  uint64_t h;
  uint32_t klen;
  uint8_t *key;
  void *val;
};

struct map {
  struct node **b;
  size_t nb, n;
};

static uint64_t hash_bytes(const uint8_t *p, size_t n) { /* FNV-1a */
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h ^ (h >> 29);
}

static int map_init(struct map *m, size_t nb) {
  m->b = calloc(nb, sizeof *m->b);
  m->nb = nb;
  m->n = 0;
  return m->b ? 0 : -ENOMEM;
}

static struct node *map_find(struct map *m, const uint8_t *k, uint32_t klen, uint64_t h) {
  for (struct node *e = m->b[h & (m->nb - 1)]; e; e = e->next)
    if (e->h == h && e->klen == klen && memcmp(e->key, k, klen) == 0) return e;
  return NULL;
}

static void *map_get(struct map *m, const uint8_t *k, uint32_t klen) {
  struct node *e = map_find(m, k, klen, hash_bytes(k, klen));
  return e ? e->val : NULL;
}

static void map_grow(struct map *m) {
  size_t nb = m->nb * 2;
  struct node **b = calloc(nb, sizeof *b);
  if (!b) return; /* a longer chain, not a failure */
  for (size_t i = 0; i < m->nb; i++)
    for (struct node *e = m->b[i], *next; e; e = next) {
      next = e->next;
      e->next = b[e->h & (nb - 1)];
      b[e->h & (nb - 1)] = e;
    }
  free(m->b);
  m->b = b;
  m->nb = nb;
}

/* Set k → val (replacing: the old value is returned through *old when given). -ENOMEM or 0. */
static int map_put(struct map *m, const uint8_t *k, uint32_t klen, void *val, void **old) {
  uint64_t h = hash_bytes(k, klen);
  struct node *e = map_find(m, k, klen, h);
  if (old) *old = e ? e->val : NULL;
  if (e) {
    e->val = val;
    return 0;
  }
  e = malloc(sizeof *e);
  uint8_t *key = malloc(klen ? klen : 1);
  if (!e || !key) {
    free(e);
    free(key);
    return -ENOMEM;
  }
  memcpy(key, k, klen);
  *e = (struct node){m->b[h & (m->nb - 1)], h, klen, key, val};
  m->b[h & (m->nb - 1)] = e;
  if (++m->n > m->nb) map_grow(m);
  return 0;
}

static void *map_del(struct map *m, const uint8_t *k, uint32_t klen) {
  uint64_t h = hash_bytes(k, klen);
  for (struct node **pp = &m->b[h & (m->nb - 1)]; *pp; pp = &(*pp)->next) {
    struct node *e = *pp;
    if (e->h == h && e->klen == klen && memcmp(e->key, k, klen) == 0) {
      void *val = e->val;
      *pp = e->next;
      free(e->key);
      free(e);
      m->n--;
      return val;
    }
  }
  return NULL;
}

static void map_clear(struct map *m, void (*free_val)(void *)) {
  for (size_t i = 0; i < m->nb; i++) {
    for (struct node *e = m->b[i], *next; e; e = next) {
      next = e->next;
      if (free_val) free_val(e->val);
      free(e->key);
      free(e);
    }
    m->b[i] = NULL;
  }
  m->n = 0;
}

/* ---- a file's burst -------------------------------------------------------------------------- */
struct pidw {
  int32_t pid;
  int32_t writer; /* it created, modified or closed-for-write the file */
};

struct burst {
  struct burst *prev, *next; /* by last event, the longest quiet first */
  uint8_t *key;
  uint32_t klen;
  char *path, *renamed_from;
  int64_t start_ns, end_ns, n;
  uint32_t mask;
  int is_dir, scanned;
  struct pidw *pids; /* `few` until a third pid */
  int npids, cap;
  struct pidw few[2];
};

/* the texts Python gives (fr_set_text): the six op names, then these */
enum { T_FOUND_BY = 6, T_WRITERS_UNKNOWN, T_DELETED, T_GONE, T_BUDGET, T_COUNT };

struct fr {
  struct map bursts, dirs, pids;
  struct burst *first, *last;
  int nscanned; /* bursts keyed by path (found by a new directory's listing) */
  uint8_t *buf;
  size_t bufsize;
  uint8_t *out; /* finished bursts waiting for Python */
  size_t out_len, out_cap, out_files;
  int64_t out_max_end;
  /* the paths of the batch's entries the file tracker watches, each NUL-terminated (fr_set_list:
   * an entry whose mask has a bit of list_want and none of list_skip, not a directory) */
  uint32_t list_want, list_skip;
  uint8_t *paths;
  size_t paths_len, paths_cap;
  char *text[T_COUNT]; /* JSON texts from Python: the op names (op_bits order), then T_FOUND_BY... */
  size_t text_len[T_COUNT];
  uint32_t op_bits[6];
  int64_t events_fast, events_kept, files;
  /* fr_cycle's state between its returns: the merge pause under way, this read's accounting */
  int64_t pause_until_ns, kept_at_read, mine_ns, flushed_ns;
  int pause_mine, read_any;
  /* fr_take's directory for statx: an O_PATH descriptor on the directory path `at_dir` names (a
   * dirs value), opened at the first file it finishes there and closed before fr_take returns */
  const char *at_dir, *last_dir; /* last_dir: the directory of the file finished before */
  int at_fd;
  /* the sizes read (statx of a finished burst) within a budget, fr_set_size_budget: a token bucket
   * filled at size_per_ns a nanosecond of the bursts' stamps up to size_cap; size_per_ns < 0: none */
  double size_level, size_per_ns, size_cap;
  int64_t size_at_ns, sizes_not_read;
  uint8_t keybuf[4 + 256 + 4096];
  char pathbuf[8192];
};

static void burst_free(struct burst *b) {
  if (!b) return;
  free(b->key);
  free(b->path);
  free(b->renamed_from);
  if (b->pids != b->few) free(b->pids);
  free(b);
}

static void burst_free_v(void *b) { burst_free(b); }

static void lru_unlink(struct fr *s, struct burst *b) {
  if (b->prev) b->prev->next = b->next; else s->first = b->next;
  if (b->next) b->next->prev = b->prev; else s->last = b->prev;
  b->prev = b->next = NULL;
}

static void lru_append(struct fr *s, struct burst *b) {
  b->prev = s->last;
  b->next = NULL;
  if (s->last) s->last->next = b; else s->first = b;
  s->last = b;
}

static int is_scan_key(const uint8_t *k, uint32_t klen) {
  return klen >= 2 && k[0] == (SCAN_TAG & 0xff) && k[1] == (SCAN_TAG >> 8);
}

/* Table the burst under key k (a copy); it goes to the end of the quiet order. */
static int table_put(struct fr *s, struct burst *b, const uint8_t *k, uint32_t klen) {
  void *old = NULL;
  uint8_t *key = malloc(klen ? klen : 1);
  if (!key) return -ENOMEM;
  memcpy(key, k, klen);
  if (map_put(&s->bursts, k, klen, b, &old)) {
    free(key);
    return -ENOMEM;
  }
  free(b->key);
  b->key = key;
  b->klen = klen;
  if (old && old != b) { /* a rename over an open burst: it is replaced (the Python path's rule) */
    struct burst *o = old;
    lru_unlink(s, o);
    if (is_scan_key(o->key, o->klen)) s->nscanned--;
    burst_free(o);
  }
  if (is_scan_key(k, klen) && old != b) s->nscanned++;
  if (old == b) lru_unlink(s, b);
  lru_append(s, b);
  return 0;
}

/* Take the burst under key k out of the table (NULL when none). */
static struct burst *table_pop(struct fr *s, const uint8_t *k, uint32_t klen) {
  struct burst *b = map_del(&s->bursts, k, klen);
  if (b) {
    lru_unlink(s, b);
    if (is_scan_key(k, klen)) s->nscanned--;
  }
  return b;
}

static struct burst *burst_new(const char *path, int64_t t_ns, int is_dir) {
  struct burst *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  b->path = strdup(path);
  if (!b->path) {
    free(b);
    return NULL;
  }
  b->start_ns = b->end_ns = t_ns;
  b->is_dir = is_dir;
  return b;
}

static void note(struct burst *b, uint32_t mask, int32_t pid, int64_t t_ns) {
  b->mask |= mask;
  b->end_ns = t_ns;
  b->n++;
  int writer = (mask & WRITE_MASK) != 0;
  for (int i = 0; i < b->npids; i++)
    if (b->pids[i].pid == pid) {
      b->pids[i].writer |= writer;
      return;
    }
  if (!b->cap) {
    b->pids = b->few;
    b->cap = 2;
  } else if (b->npids == b->cap) {
    int cap = 2 * b->cap;
    struct pidw *p = b->pids == b->few ? malloc(cap * sizeof *p) : realloc(b->pids, cap * sizeof *p);
    if (!p) return; /* one pid fewer named, rather than nothing */
    if (b->pids == b->few) memcpy(p, b->few, sizeof b->few);
    b->pids = p;
    b->cap = cap;
  }
  b->pids[b->npids++] = (struct pidw){pid, writer};
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* ---- a finished burst as JSON ---------------------------------------------------------------
 * The entry FileActivity._entry makes in the Python reader, key for key (the texts are Python's,
 * handed over by fr_set_text; tests/test_fanreader.py holds the two readers to the same events).
 * A path is written as Python's json.dumps(path.decode("utf-8", "surrogateescape")) parses: valid
 * UTF-8 as it is, each byte of an invalid sequence as the lone surrogate U+DC00 + byte (PEP 383). */
static int out_room(struct fr *s, size_t more) {
  if (s->out_len + more <= s->out_cap) return 0;
  size_t cap = s->out_cap ? s->out_cap : 1 << 16;
  while (cap < s->out_len + more) cap *= 2;
  uint8_t *o = realloc(s->out, cap);
  if (!o) return -ENOMEM;
  s->out = o;
  s->out_cap = cap;
  return 0;
}

static int paths_room(struct fr *s, size_t more) {
  if (s->paths_len + more <= s->paths_cap) return 0;
  size_t cap = s->paths_cap ? s->paths_cap : 1 << 14;
  while (cap < s->paths_len + more) cap *= 2;
  uint8_t *p = realloc(s->paths, cap);
  if (!p) return -ENOMEM;
  s->paths = p;
  s->paths_cap = cap;
  return 0;
}

/* Callers reserve room first: at most 6 bytes a path byte, 24 an integer. */
static void put(struct fr *s, const char *text, size_t n) {
  memcpy(s->out + s->out_len, text, n);
  s->out_len += n;
}
#define PUT(s, lit) put(s, lit, sizeof lit - 1)

static const char DIGIT_PAIRS[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                  "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                  "8081828384858687888990919293949596979899";

static void put_i64(struct fr *s, int64_t v) { /* two digits a division */
  char tmp[24];
  int i = 24, neg = v < 0;
  uint64_t u = neg ? 0 - (uint64_t)v : (uint64_t)v;
  while (u >= 100) {
    memcpy(tmp + (i -= 2), DIGIT_PAIRS + 2 * (u % 100), 2);
    u /= 100;
  }
  if (u >= 10) memcpy(tmp + (i -= 2), DIGIT_PAIRS + 2 * u, 2);
  else tmp[--i] = (char)('0' + u);
  if (neg) tmp[--i] = '-';
  put(s, tmp + i, 24 - i);
}

/* the length of the valid UTF-8 sequence at p (RFC 3629: no overlong form, no surrogate, at most
 * U+10FFFF), 0 when there is none */
static int utf8_len(const uint8_t *p, size_t left) {
  uint8_t c = p[0];
  if (c < 0x80) return 1;
  int n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (!n || (size_t)n > left) return 0;
  for (int i = 1; i < n; i++)
    if ((p[i] & 0xC0) != 0x80) return 0;
  if (c == 0xE0 && p[1] < 0xA0) return 0; /* overlong */
  if (c == 0xED && p[1] > 0x9F) return 0; /* a surrogate */
  if (c == 0xF0 && p[1] < 0x90) return 0; /* overlong */
  if (c == 0xF4 && p[1] > 0x8F) return 0; /* past U+10FFFF */
  return n;
}

static void put_str(struct fr *s, const char *text) {
  static const char hex[] = "0123456789abcdef";
  const uint8_t *p = (const uint8_t *)text;
  size_t n = strlen(text);
  s->out[s->out_len++] = '"';
  for (size_t i = 0; i < n;) {
    size_t plain = i; /* printable ASCII but the two JSON escapes: as it is, in one copy */
    while (plain < n && p[plain] >= 0x20 && p[plain] < 0x80 && p[plain] != '"' && p[plain] != '\\') plain++;
    if (plain > i) {
      put(s, text + i, plain - i);
      if ((i = plain) == n) break;
    }
    uint8_t c = p[i];
    int k = utf8_len(p + i, n - i);
    if (c == '"' || c == '\\') {
      char e[2] = {'\\', (char)c};
      put(s, e, 2);
    } else if (c < 0x20) {
      char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      put(s, e, 6);
    } else if (k) {
      put(s, (const char *)p + i, k);
      i += k;
      continue;
    } else {
      char e[6] = {'\\', 'u', 'd', 'c', hex[c >> 4], hex[c & 15]};
      put(s, e, 6);
    }
    i++;
  }
  s->out[s->out_len++] = '"';
}

static void put_ids(struct fr *s, const int64_t *v, int n) {
  s->out[s->out_len++] = '[';
  for (int i = 0; i < n; i++) {
    if (i) s->out[s->out_len++] = ',';
    put_i64(s, v[i]);
  }
  s->out[s->out_len++] = ']';
}

static void put_text(struct fr *s, int which) { put(s, s->text[which], s->text_len[which]); }

/* statx(2) of the burst's path. Where fr_take finishes it (`name`: its entry in the directory
 * `dir`, whose path and the name's are in s->pathbuf, which is the burst's path) and the file
 * before it in this fr_take call was in the same directory, relative to an O_PATH descriptor on the
 * directory (openat(2); no fsnotify event for O_PATH): the lookup walks one component instead of
 * the whole path (path_resolution(7)) and the answer is the path's. Opened at the second file in a
 * row in one directory (files spread over many directories open nothing), kept for the next files
 * there, closed before fr_take returns: no descriptor stays on a user's directory (an unmount would
 * find it busy). Issue 21, cost: the walk was ~half of statx's cost. */
static int look_statx(struct fr *s, struct burst *b, const char *dir, const char *name, struct statx *st) {
  const unsigned mask = STATX_SIZE | STATX_BTIME;
  /* a path of PATH_MAX or more fails by its path (ENAMETOOLONG), as the Python reader's does */
  if (dir && strcmp(b->path, s->pathbuf) == 0 && strlen(b->path) < PATH_MAX) {
    if (dir == s->at_dir && s->at_fd >= 0) return statx(s->at_fd, name, AT_SYMLINK_NOFOLLOW, mask, st);
    if (dir == s->last_dir && dir != s->at_dir) {
      if (s->at_fd >= 0) close(s->at_fd);
      s->at_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
      s->at_dir = dir; /* a failed open is not tried again in this call */
      if (s->at_fd >= 0) return statx(s->at_fd, name, AT_SYMLINK_NOFOLLOW, mask, st);
    }
    s->last_dir = dir;
  }
  return statx(AT_FDCWD, b->path, AT_SYMLINK_NOFOLLOW, mask, st);
}

/* A size may be read for a burst finished at t_ns (its last event's stamp): the bucket is filled
 * for the time since its last fill (a stamp earlier than that fills nothing) and drawn by one. The
 * rule and its figures are Python's (fileactivity.SIZES_PER_S, SIZES_AT_ONCE; the Python reader
 * draws on bucket.TokenBucket with the same operations, so the two readers agree). */
static int size_budget(struct fr *s, int64_t t_ns) {
  if (s->size_per_ns < 0) return 1;
  if (t_ns > s->size_at_ns) {
    s->size_level += (double)(t_ns - s->size_at_ns) * s->size_per_ns;
    if (s->size_level > s->size_cap) s->size_level = s->size_cap;
    s->size_at_ns = t_ns;
  }
  if (s->size_level < 1) {
    s->sizes_not_read++;
    return 0;
  }
  s->size_level -= 1;
  return 1;
}

static void at_close(struct fr *s) {
  if (s->at_fd >= 0) close(s->at_fd);
  s->at_fd = -1;
  s->at_dir = s->last_dir = NULL;
}

/* A finished burst: statx(2) of its path unless deleted or the size budget is spent (its size;
 * its birth time, CLOCK_REALTIME − offset_ns on CLOCK_MONOTONIC, as the start of a burst that
 * created the file when earlier than its first event read, by less than max_lead_ns), then its
 * entry, appended to the batch (the caller frees the burst). `dir`, `name`: look_statx's. */
static void finish(struct fr *s, struct burst *b, int deleted, int64_t offset_ns, int64_t max_lead_ns,
                   const char *dir, const char *name) {
  int64_t size = -1, start = b->start_ns;
  int btime = 0, gone = 0, unread = !deleted && !size_budget(s, b->end_ns);
  if (!deleted && !unread) {
    struct statx st;
    if (look_statx(s, b, dir, name, &st) != 0) {
      gone = 1;
    } else {
      if (!b->is_dir) size = (int64_t)st.stx_size;
      if ((st.stx_mask & STATX_BTIME) && (b->mask & FAN_CREATE)) {
        int64_t born = (int64_t)st.stx_btime.tv_sec * 1000000000 + st.stx_btime.tv_nsec - offset_ns;
        if (born < start && start - born < max_lead_ns) {
          start = born;
          btime = 1;
        }
      }
    }
  }
  int np = b->npids, nw = 0;
  int64_t few[2 * 8], *ids = np <= 8 ? few : malloc(2 * np * sizeof *ids), *all = ids + np;
  if (!ids) return;
  for (int i = 0; i < np; i++) {
    if (b->pids[i].writer) ids[nw++] = b->pids[i].pid;
    all[i] = b->pids[i].pid;
  }
  if (nw > 1) qsort(ids, nw, 8, cmp_i64);
  if (np > 1) qsort(all, np, 8, cmp_i64);
  size_t plen = strlen(b->path), rlen = b->renamed_from ? strlen(b->renamed_from) : 0;
  size_t texts = 0;
  for (int i = 0; i < T_COUNT; i++) texts += s->text_len[i];
  int listed = !b->is_dir && plen && (b->mask & s->list_want) && !(b->mask & s->list_skip);
  if (out_room(s, 512 + 6 * (plen + rlen) + 2 * 24 * (size_t)np + texts) || (listed && paths_room(s, plen + 1))) {
    if (ids != few) free(ids);
    return;
  }
  if (listed) { /* the path as the entry's "path" holds it, before JSON's escapes */
    memcpy(s->paths + s->paths_len, b->path, plen + 1);
    s->paths_len += plen + 1;
  }
  if (s->out_files) s->out[s->out_len++] = ',';
  PUT(s, "{\"path\":");
  put_str(s, b->path);
  PUT(s, ",\"start_ns\":");
  put_i64(s, start);
  if (btime) PUT(s, ",\"start_from\":\"btime\",\"end_ns\":");
  else PUT(s, ",\"start_from\":\"read\",\"end_ns\":");
  put_i64(s, b->end_ns);
  PUT(s, ",\"ops\":[");
  int first = 1;
  for (int i = 0; i < 6; i++)
    if (b->mask & s->op_bits[i]) {
      if (!first) s->out[s->out_len++] = ',';
      put_text(s, i);
      first = 0;
    }
  PUT(s, "],\"writers\":");
  put_ids(s, ids, nw);
  PUT(s, ",\"size_bytes\":");
  if (size < 0) PUT(s, "null");
  else put_i64(s, size);
  PUT(s, ",\"kernel_events\":");
  put_i64(s, b->n);
  if (nw != np) {
    PUT(s, ",\"pids\":");
    put_ids(s, all, np);
  }
  if (b->is_dir) {
    PUT(s, ",\"dir\":true");
  } else if (deleted || gone || unread) {
    PUT(s, ",\"size_unknown\":");
    put_text(s, deleted ? T_DELETED : gone ? T_GONE : T_BUDGET);
  }
  if (b->renamed_from && rlen) {
    PUT(s, ",\"renamed_from\":");
    put_str(s, b->renamed_from);
  }
  if (b->scanned) {
    PUT(s, ",\"found_by\":");
    put_text(s, T_FOUND_BY);
    if (!nw) {
      PUT(s, ",\"writers_unknown\":");
      put_text(s, T_WRITERS_UNKNOWN);
    }
  }
  s->out[s->out_len++] = '}';
  if (!s->out_files || b->end_ns > s->out_max_end) s->out_max_end = b->end_ns;
  s->out_files++;
  s->files++;
  if (ids != few) free(ids);
}

/* ---- what Python calls --------------------------------------------------------------------- */
int fr_abi(void) { return FR_ABI; }

struct fr *fr_new(size_t bufsize) {
  struct fr *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->bufsize = bufsize;
  s->at_fd = -1;
  s->size_per_ns = -1;
  s->buf = malloc(bufsize);
  if (!s->buf || map_init(&s->bursts, 1024) || map_init(&s->dirs, 256) || map_init(&s->pids, 64)) {
    free(s->buf);
    free(s->bursts.b);
    free(s->dirs.b);
    free(s->pids.b);
    free(s);
    return NULL;
  }
  return s;
}

void fr_free(struct fr *s) {
  if (!s) return;
  map_clear(&s->bursts, burst_free_v);
  map_clear(&s->dirs, free);
  map_clear(&s->pids, NULL);
  free(s->bursts.b);
  free(s->dirs.b);
  free(s->pids.b);
  free(s->buf);
  free(s->out);
  free(s->paths);
  for (int i = 0; i < T_COUNT; i++) free(s->text[i]);
  free(s);
}

/* read(2) the group's queued events into the reader's buffer: bytes, 0 when none, -errno. */
int64_t fr_read(struct fr *s, int fd) {
  ssize_t n = read(fd, s->buf, s->bufsize);
  if (n < 0) return errno == EAGAIN ? 0 : -errno;
  return n;
}

const uint8_t *fr_buf(struct fr *s) { return s->buf; }

/* The tree's pid, already described by Python: its events may be taken here. */
int fr_add_pid(struct fr *s, int32_t pid) { return map_put(&s->pids, (uint8_t *)&pid, 4, (void *)1, NULL); }

void fr_drop_pid(struct fr *s, int32_t pid) { map_del(&s->pids, (uint8_t *)&pid, 4); }

/* A directory (its file handle) whose every entry is under the recorded paths, and its path. */
int fr_set_dir(struct fr *s, const uint8_t *handle, uint32_t hlen, const char *path) {
  char *p = strdup(path);
  void *old = NULL;
  if (!p || map_put(&s->dirs, handle, hlen, p, &old)) {
    free(p);
    return -ENOMEM;
  }
  free(old);
  return 0;
}

/* A directory renamed: the paths the handles name changed (Python looks them up again). */
void fr_clear_dirs(struct fr *s) { map_clear(&s->dirs, free); }

static uint32_t make_key(struct fr *s, const uint8_t *handle, uint32_t hlen, const uint8_t *name, uint32_t nlen) {
  s->keybuf[0] = hlen & 0xff;
  s->keybuf[1] = hlen >> 8;
  memcpy(s->keybuf + 2, handle, hlen);
  memcpy(s->keybuf + 2 + hlen, name, nlen);
  return 2 + hlen + nlen;
}

static uint32_t scan_key(struct fr *s, const char *path) {
  size_t n = strlen(path);
  if (n > sizeof s->keybuf - 2) n = sizeof s->keybuf - 2;
  s->keybuf[0] = SCAN_TAG & 0xff;
  s->keybuf[1] = SCAN_TAG >> 8;
  memcpy(s->keybuf + 2, path, n);
  return 2 + n;
}

/* One file event of the tree's on (handle, name), whose path is `path` (NULL: Python found it
 * not under the paths, so only a burst already open takes it). The rule of
 * FileActivity._event: a new burst (or the one a listing found for the path) is tabled unless
 * the event ends it; an event that ends a burst (close_write, delete) finishes it. 1 when
 * taken, 0 when not, -ENOMEM. */
static int note_event(struct fr *s, const uint8_t *handle, uint32_t hlen, const uint8_t *name, uint32_t nlen,
                      const char *path, uint32_t mask, int32_t pid, int64_t t_ns, int64_t offset_ns,
                      int64_t max_lead_ns, const char *dir, const char *rel) {
  if (hlen > 256 || nlen > 4096) return 0;
  uint32_t klen = make_key(s, handle, hlen, name, nlen);
  struct burst *b = map_get(&s->bursts, s->keybuf, klen);
  if (!b) {
    if (!path) return 0;
    if (s->nscanned) {
      uint32_t sk = scan_key(s, path);
      b = table_pop(s, s->keybuf, sk);
      klen = make_key(s, handle, hlen, name, nlen);
    }
    if (!b && (mask & ENDS_MASK)) { /* begun and ended by this event (the kernel merged the file's
                                       create, writes and close): never tabled, nothing allocated */
      struct burst one = {.path = (char *)path, .start_ns = t_ns, .end_ns = t_ns, .is_dir = (mask & FAN_ONDIR) != 0};
      s->events_kept++;
      note(&one, mask, pid, t_ns);
      finish(s, &one, (mask & FAN_DELETE) != 0, offset_ns, max_lead_ns, dir, rel);
      if (one.pids != one.few) free(one.pids);
      return 1;
    }
    if (!b && !(b = burst_new(path, t_ns, (mask & FAN_ONDIR) != 0))) return -ENOMEM;
    if (!(mask & ENDS_MASK) && table_put(s, b, s->keybuf, klen)) {
      burst_free(b);
      return -ENOMEM;
    }
  } else if (mask & ENDS_MASK) {
    table_pop(s, s->keybuf, klen);
  } else {
    lru_unlink(s, b);
    lru_append(s, b);
  }
  s->events_kept++;
  note(b, mask, pid, t_ns);
  if (mask & ENDS_MASK) {
    finish(s, b, (mask & FAN_DELETE) != 0, offset_ns, max_lead_ns, dir, rel);
    burst_free(b);
  }
  return 1;
}

int fr_note(struct fr *s, const uint8_t *handle, uint32_t hlen, const uint8_t *name, uint32_t nlen,
            const char *path, uint32_t mask, int32_t pid, int64_t t_ns, int64_t offset_ns, int64_t max_lead_ns) {
  return note_event(s, handle, hlen, name, nlen, path, mask, pid, t_ns, offset_ns, max_lead_ns, NULL, NULL);
}

/* A rename of the tree's (FAN_RENAME: both names): FileActivity._rename's rule. */
int fr_rename(struct fr *s, const uint8_t *oh, uint32_t ohlen, const uint8_t *on, uint32_t onlen, const uint8_t *nh,
              uint32_t nhlen, const uint8_t *nn, uint32_t nnlen, const char *old_path, const char *new_path,
              int32_t pid, int64_t t_ns, int is_dir) {
  if (ohlen > 256 || onlen > 4096 || nhlen > 256 || nnlen > 4096) return 0;
  struct burst *b = table_pop(s, s->keybuf, make_key(s, oh, ohlen, on, onlen));
  if (!b && s->nscanned) b = table_pop(s, s->keybuf, scan_key(s, old_path));
  if (!b && !(b = burst_new(new_path, t_ns, is_dir))) return -ENOMEM;
  if (!b->renamed_from) b->renamed_from = strdup(old_path);
  char *p = strdup(new_path);
  if (p) {
    free(b->path);
    b->path = p;
  }
  if (table_put(s, b, s->keybuf, make_key(s, nh, nhlen, nn, nnlen))) {
    burst_free(b);
    return -ENOMEM;
  }
  s->events_kept++;
  note(b, FAN_RENAME, pid, t_ns);
  return 1;
}

/* A directory renamed from old to new: the open bursts under it follow. */
void fr_move_prefix(struct fr *s, const char *old, const char *new) {
  size_t ol = strlen(old), nl = strlen(new);
  for (struct burst *b = s->first; b; b = b->next) {
    if (strncmp(b->path, old, ol) == 0 && b->path[ol] == '/') {
      size_t rest = strlen(b->path + ol);
      char *p = malloc(nl + rest + 1);
      if (!p) continue;
      memcpy(p, new, nl);
      memcpy(p + nl, b->path + ol, rest + 1);
      free(b->path);
      b->path = p;
    }
  }
}

/* An entry of a new directory's listing (made before its mark): a burst begun at t_ns. */
int fr_add_scanned(struct fr *s, const char *path, int64_t t_ns, int is_dir) {
  uint32_t klen = scan_key(s, path);
  if (map_get(&s->bursts, s->keybuf, klen)) return 0;
  struct burst *b = burst_new(path, t_ns, is_dir);
  if (!b) return -ENOMEM;
  b->mask = FAN_CREATE;
  b->scanned = 1;
  if (table_put(s, b, s->keybuf, klen)) {
    burst_free(b);
    return -ENOMEM;
  }
  return 1;
}

/* The last event of the longest-quiet open burst; -1 when none is open. */
int64_t fr_first_end(struct fr *s) { return s->first ? s->first->end_ns : -1; }

/* Finish the bursts quiet for quiet_ns at now_ns (every one with `everything`). */
void fr_emit(struct fr *s, int64_t now_ns, int64_t quiet_ns, int everything, int64_t offset_ns, int64_t max_lead_ns) {
  while (s->first && (everything || now_ns - s->first->end_ns >= quiet_ns)) {
    struct burst *b = s->first;
    table_pop(s, b->key, b->klen);
    finish(s, b, 0, offset_ns, max_lead_ns, NULL, NULL);
    burst_free(b);
  }
}

/* Take the events of buf[*off:len) read at t_ns while they are ones this reader takes whole;
 * return 1 with *off and *ev_len on the first one Python must judge, 0 at the buffer's end
 * (*off = len: a malformed tail is dropped as the Python parser drops it). */
int fr_take(struct fr *s, int64_t len, int64_t *off, int64_t *ev_len, int64_t t_ns, int64_t offset_ns,
            int64_t max_lead_ns) {
  const uint8_t *buf = s->buf;
  int64_t o = *off;
  while (o + META_LEN <= len) {
    uint32_t event_len, mask;
    uint16_t meta_len;
    int32_t pid;
    uint64_t mask64;
    memcpy(&event_len, buf + o, 4);
    memcpy(&meta_len, buf + o + 6, 2);
    memcpy(&mask64, buf + o + 8, 8);
    memcpy(&pid, buf + o + 20, 4);
    mask = (uint32_t)mask64;
    int64_t end = o + event_len;
    if (buf[o + 4] != FAN_METADATA_VERSION || event_len < META_LEN || end > len) break;
    const uint8_t *r = buf + o + META_LEN;
    uint16_t ilen;
    uint32_t hbytes = 0;
    int fast = meta_len == META_LEN && !(mask & SLOW_MASK) && event_len >= META_LEN + 20;
    if (fast) {
      memcpy(&ilen, r + 2, 2);
      memcpy(&hbytes, r + 12, 4);
      fast = r[0] == FAN_EVENT_INFO_TYPE_DFID_NAME && o + META_LEN + ilen == end && 20 + hbytes < ilen &&
             map_get(&s->pids, (const uint8_t *)&pid, 4) != NULL;
    }
    const char *dir = NULL;
    const uint8_t *handle = r + 12, *name = NULL;
    size_t nlen = 0;
    if (fast) {
      dir = map_get(&s->dirs, handle, 8 + hbytes);
      name = handle + 8 + hbytes;
      const uint8_t *z = memchr(name, 0, (r + ilen) - name);
      nlen = z ? (size_t)(z - name) : (size_t)((r + ilen) - name);
      /* an event on the directory itself ("" or "."): Python's */
      fast = dir && nlen && !(nlen == 1 && name[0] == '.');
    }
    if (fast) {
      size_t dl = strlen(dir);
      fast = dl + 1 + nlen < sizeof s->pathbuf;
      if (fast) {
        memcpy(s->pathbuf, dir, dl);
        s->pathbuf[dl] = '/';
        memcpy(s->pathbuf + dl + 1, name, nlen);
        s->pathbuf[dl + 1 + nlen] = 0;
        fast = note_event(s, handle, 8 + hbytes, name, nlen, s->pathbuf, mask, pid, t_ns, offset_ns, max_lead_ns,
                          dir, s->pathbuf + dl + 1) == 1;
      }
    }
    if (!fast) {
      at_close(s);
      *off = o;
      *ev_len = event_len;
      return 1;
    }
    s->events_fast++;
    o = end;
  }
  at_close(s);
  *off = len;
  return 0;
}

/* ---- the read cycle ------------------------------------------------------------------------
 * FileActivity._run's loop while the tree writes, here so that a read cycle (~50 a second: one a
 * MERGE_S) costs no Python: the merge pause, read(2) of the group, fr_take, and the bursts gone
 * quiet finished. Python is called back (the return value says why) only for what it decides:
 *   FR_EVENT  an event fr_take cannot take whole: io[IO_OFF], io[IO_EVLEN] in the buffer of
 *             io[IO_LEN] bytes read at io[IO_T]; Python judges it, takes the rest of that buffer
 *             (fr_take) and calls fr_cycle again, which reads on;
 *   FR_CONN   the proc connector has events (an exec during a merge pause of the tree's, which
 *             names a short-lived writer while it runs; or forks and execs queued before a read,
 *             whose pids must be known before that read's events are judged): Python drains
 *             them (ProcTree.drain) and calls again; the pause goes on to its end;
 *   FR_FLUSH  finished entries wait (fr_out) and flush_every_ns has passed since the last flush;
 *   FR_IDLE   a read found the queue empty and nothing was read since the last pause: Python
 *             waits for the kernel (select) as before;
 *   FR_STOP   stop_fd became readable; -errno when read(2) failed.
 * After a read that got events, the pause is merge_ns when the tree's events were among them
 * (waking for execs meanwhile), else others_ns (other processes' events only: no wake-up for
 * execs), as FileActivity._merge_pause. The stamp of a read is CLOCK_MONOTONIC (the recorder's
 * clock, record/clock.py) just before read(2); CLOCK_REALTIME − CLOCK_MONOTONIC is read once a
 * read, for the birth times (io[IO_OFFSET]). An fd < 0 is not polled. */
enum { FR_IDLE = 0, FR_EVENT = 1, FR_CONN = 2, FR_FLUSH = 3, FR_STOP = 4 };
enum { IO_OFF, IO_EVLEN, IO_LEN, IO_T, IO_OFFSET, IO_MINE, IO_COUNT };

static int64_t mono_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int64_t realtime_offset_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec - mono_ns();
}

/* Poll fds (-1 skipped) for input for timeout_ms; which ones are readable, as bits. */
static int ready(const int *fds, int n, int timeout_ms) {
  struct pollfd p[3];
  int k = 0, bits = 0;
  for (int i = 0; i < n; i++)
    if (fds[i] >= 0) p[k++] = (struct pollfd){fds[i], POLLIN, 0};
  if (!k) return 0;
  if (poll(p, k, timeout_ms) <= 0) return 0;
  for (int i = 0, j = 0; i < n; i++)
    if (fds[i] >= 0 && (p[j++].revents & (POLLIN | POLLHUP | POLLERR))) bits |= 1 << i;
  return bits;
}

/* The reader continues from its state: call with pause_ns = 0 to begin a cycle after a wake-up. */
int fr_cycle(struct fr *s, int fan_fd, int stop_fd, int exec_fd, int fork_fd, int64_t merge_ns, int64_t others_ns,
             int64_t flush_every_ns, int64_t quiet_ns, int64_t max_lead_ns, int64_t *io) {
  io[IO_MINE] = s->mine_ns;
  for (;;) {
    /* the merge pause: the kernel merges a writer's repeated events while they wait unread */
    int64_t now;
    while (s->pause_until_ns && (now = mono_ns()) < s->pause_until_ns) {
      int fds[2] = {stop_fd, s->pause_mine ? exec_fd : -1};
      int ms = (int)((s->pause_until_ns - now + 999999) / 1000000);
      int r = ready(fds, 2, ms);
      if (r & 1) return FR_STOP;
      if (r & 2) return FR_CONN;
    }
    s->pause_until_ns = 0;
    int conn[3] = {exec_fd, fork_fd, stop_fd};
    int r = ready(conn, 3, 0); /* the tree's forks before these events are judged; a stop */
    if (r & 4) return FR_STOP;
    if (r) return FR_CONN;
    int64_t t = mono_ns();
    ssize_t n = read(fan_fd, s->buf, s->bufsize);
    if (n < 0 && errno != EAGAIN) return -errno;
    if (n > 0) {
      if (!s->read_any) s->kept_at_read = s->events_kept;
      s->read_any = 1;
      io[IO_OFF] = 0;
      io[IO_LEN] = n;
      io[IO_T] = t;
      io[IO_OFFSET] = realtime_offset_ns();
      if (fr_take(s, n, &io[IO_OFF], &io[IO_EVLEN], t, io[IO_OFFSET], max_lead_ns)) return FR_EVENT;
      /* fanotify_read stops at an empty queue or at an event that does not fit (fs/notify/fanotify/
       * fanotify_user.c): a read that left room for the longest event found the queue empty. What
       * came since is read after the pause, as what comes just after an empty read is: no poll and
       * read(2) more a cycle to find it empty (issue 21, cost) */
      if ((size_t)n + EVENT_MAX_LEN > s->bufsize) continue;
    }
    /* the queue is empty */
    now = mono_ns();
    int64_t offset = realtime_offset_ns();
    fr_emit(s, now, quiet_ns, 0, offset, max_lead_ns);
    if (!s->read_any) return FR_IDLE;
    s->read_any = 0;
    s->pause_mine = s->events_kept > s->kept_at_read;
    if (s->pause_mine) s->mine_ns = now;
    io[IO_MINE] = s->mine_ns;
    s->pause_until_ns = now + (s->pause_mine ? merge_ns : others_ns);
    if (s->out_files && now - s->flushed_ns >= flush_every_ns) {
      s->flushed_ns = now;
      return FR_FLUSH;
    }
  }
}

/* One text of the entries, already JSON (an op's name with its mask bits: which < 6). */
int fr_set_text(struct fr *s, int which, uint32_t bits, const char *json) {
  if (which < 0 || which >= T_COUNT) return -EINVAL;
  char *t = strdup(json);
  if (!t) return -ENOMEM;
  free(s->text[which]);
  s->text[which] = t;
  s->text_len[which] = strlen(t);
  if (which < 6) s->op_bits[which] = bits;
  return 0;
}

/* The entries finished since the last fr_out_reset, as the JSON of a list's items (no brackets):
 * their bytes, how many, and the latest end_ns among them. */
const uint8_t *fr_out(struct fr *s, int64_t *len, int64_t *files, int64_t *max_end_ns) {
  *len = (int64_t)s->out_len;
  *files = (int64_t)s->out_files;
  *max_end_ns = s->out_max_end;
  return s->out;
}

void fr_out_reset(struct fr *s) {
  s->out_len = 0;
  s->out_files = 0;
  s->paths_len = 0;
}

/* List the path of each finished entry whose mask has a bit of `want` and none of `skip` (not a
 * directory) beside the batch's JSON (want = 0: none, the default). The rule is the file tracker's
 * (record/filetracker.py WATCHED_OPS, UNWATCHED_OPS), given as mask bits by Python. */
void fr_set_list(struct fr *s, uint32_t want, uint32_t skip) {
  s->list_want = want;
  s->list_skip = skip;
}

/* The listed paths of the entries finished since the last fr_out_reset, each NUL-terminated, in
 * the order of the entries: their bytes. */
const uint8_t *fr_paths(struct fr *s, int64_t *len) {
  *len = (int64_t)s->paths_len;
  return s->paths;
}

/* Read sizes within a budget (size_budget): `per_ns` files a nanosecond of the bursts' stamps, at
 * most `at_once` in a row; the bucket starts full. per_ns < 0: no budget (the default). */
void fr_set_size_budget(struct fr *s, double per_ns, double at_once) {
  s->size_per_ns = per_ns;
  s->size_level = s->size_cap = at_once;
  s->size_at_ns = 0;
}

/* events taken whole here, events kept (here and through fr_note / fr_rename), files finished,
 * sizes not read (the budget spent) */
void fr_counts(struct fr *s, int64_t *out) {
  out[0] = s->events_fast;
  out[1] = s->events_kept;
  out[2] = s->files;
  out[3] = s->sizes_not_read;
}

/* ---- a look at a file's pages, for the file tracker (record/pagecache.py look) ---------------
 * Independent of the reader above: the file tracker's one look at a waiting file, done in one call
 * (issue 21, cost: at 3,300 new files a second the looks through os and ctypes were ~45 % of the
 * tracker's thread). The same steps and rules as pagecache._look_py, which stays the fallback:
 * stat(2) the path and never open(2) what is not a regular file (a device or FIFO put there);
 * open with the flags Python gives (pagecache.LOOK_FLAGS); fstat(2) the descriptor (replaced
 * between the two: not a regular file, nothing); FS_IOC_GETVERSION (ioctl_iflags(2)'s companion in
 * linux/fs.h: ext4 and btrfs write an int; an error means the file system keeps none);
 * cachestat(2) (man 2 cachestat, Linux >= 6.5: syscall `nr` as Python knows it, the whole file);
 * and close(2) before returning: no descriptor is kept on a user's file (issue 21 item 1).
 * out[]: dev, ino, has_generation, generation, size, nr_cache, nr_dirty, nr_writeback, ctime (ns).
 * Returns 0 (a regular file, out filled), 1 (the path names nothing, or no regular file, now:
 * ENOENT / ENOTDIR at stat or open, as Python's FileNotFoundError / NotADirectoryError), or
 * -errno (what Python raises as OSError). */
#define FS_IOC_GETVERSION_NR 0x80087601ul /* _IOR('v', 1, long) */

struct fr_cachestat_range {
  uint64_t off, len;
};
struct fr_cachestat {
  uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

int fr_look(const char *path, int flags, long nr_cachestat, int64_t *out) {
  struct stat st;
  if (stat(path, &st) != 0) return (errno == ENOENT || errno == ENOTDIR) ? 1 : -errno;
  if (!S_ISREG(st.st_mode)) return 1; /* never open(2) a device or FIFO put there */
  int fd;
  do fd = open(path, flags);
  while (fd < 0 && errno == EINTR); /* as Python's os.open (PEP 475) */
  if (fd < 0) return (errno == ENOENT || errno == ENOTDIR) ? 1 : -errno;
  int r = 0;
  if (fstat(fd, &st) != 0) {
    r = -errno;
  } else if (!S_ISREG(st.st_mode)) { /* replaced between stat and open */
    r = 1;
  } else {
    uint8_t gen[8] = {0};
    int32_t g = 0;
    int has_gen = ioctl(fd, FS_IOC_GETVERSION_NR, gen) == 0;
    memcpy(&g, gen, 4);
    struct fr_cachestat_range rng = {0, 0};
    struct fr_cachestat cs = {0};
    if (syscall(nr_cachestat, fd, &rng, &cs, 0u) != 0) {
      r = -errno;
    } else {
      out[0] = (int64_t)st.st_dev;
      out[1] = (int64_t)st.st_ino;
      out[2] = has_gen;
      out[3] = has_gen ? g : 0;
      out[4] = (int64_t)st.st_size;
      out[5] = (int64_t)cs.nr_cache;
      out[6] = (int64_t)cs.nr_dirty;
      out[7] = (int64_t)cs.nr_writeback;
      /* ctime: the file tracker's sign that the file changed since this look (pagecache.Look) */
      out[8] = (int64_t)st.st_ctim.tv_sec * 1000000000LL + (int64_t)st.st_ctim.tv_nsec;
    }
  }
  if (close(fd) != 0) r = -errno; /* as os.close raising in Python's finally */
  return r;
}

/* n looks in one call (record/pagecache.py look_many: the file tracker's turns of a tick, ~40 % of
 * a look's CPU was the Python around each fr_look). `paths` holds n NUL-terminated paths one after
 * another. For each: stamps[i] is CLOCK_MONOTONIC just before its look (the tracker's time of that
 * look, as clock.now_ns() before pagecache.look), out[10*i] what fr_look returned, and
 * out[10*i+1 .. 10*i+9] its answers. Returns n. */
int fr_look_many(const char *paths, int n, int flags, long nr_cachestat, int64_t *out, int64_t *stamps) {
  const char *p = paths;
  for (int i = 0; i < n; i++) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    stamps[i] = (int64_t)ts.tv_sec * 1000000000LL + (int64_t)ts.tv_nsec;
    out[10 * i] = fr_look(p, flags, nr_cachestat, out + 10 * i + 1);
    p += strlen(p) + 1;
  }
  return n;
}
