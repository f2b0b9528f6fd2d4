/*
 * common.h -- what the examples share, none of it about locking: the flag
 * parser, the threads, a seeded hash, clocks, and the error lines every
 * example prints alike. Header-only (static inline), so that each example
 * stays one C file that a reader opens at its ordo part (README.md).
 * Define EX_PROG, the program's name for its messages, before including it.
 *
 * Interface: ex_flags (argv by a spec string), ex_threads (n threads
 * released at once, watched, joined), ex_open (ordo_open, exit 2 on a bad
 * URL), ex_unusable, ex_calloc, ex_die, ex_mix64, ex_now_s, ex_sleep_us;
 * for --help, EX_HELP_BACKEND and EX_HELP_END; EX_URL_FORMS.
 */
#ifndef ORDO_EXAMPLES_COMMON_H
#define ORDO_EXAMPLES_COMMON_H
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ordo.h"

#ifndef EX_PROG
#error "define EX_PROG, the program's name, before including common.h"
#endif

/* The backend URLs ordo takes, for error lines and for --help. */
#define EX_URL_FORMS                                                           \
  "mem://, ordod://HOST:PORT, redis://HOST:PORT[/DB], "                        \
  "redlock://HOST:PORT,HOST:PORT,HOST:PORT, postgres://USER:PASS@HOST:PORT/DB" \
  " (each with an optional ?query)"
#define EX_HELP_BACKEND                                                        \
  "  --backend URL      where the locks live (default mem://): mem://,\n"      \
  "                     ordod://HOST:PORT, redis://HOST:PORT[/DB],\n"          \
  "                     redlock://HOST:PORT,HOST:PORT,HOST:PORT,\n"            \
  "                     postgres://USER:PASS@HOST:PORT/DB (each with an\n"     \
  "                     optional ?query; a password is never shown)\n"
#define EX_HELP_END                                                            \
  "  --json             print one JSON object instead of the summary\n"        \
  "Exit status: 0 the check passed, 1 it failed or the backend could not\n"    \
  "be used, 2 bad usage.\n"

/* ex_mix64 -- SplitMix64's finalizer: every output bit depends on every
 * input bit, so a seed and an index give a well-spread stream. */
static inline uint64_t ex_mix64(uint64_t z) {
  z += UINT64_C(0x9e3779b97f4a7c15);
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static inline double ex_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void ex_sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* ex_calloc -- n zeroed items of size bytes, or exit 1 out of memory,
 * naming the sizes to lower (called before anything else is open). */
static inline void *ex_calloc(long n, size_t size, const char *smaller) {
  void *p = calloc((size_t)n, size);
  if (p == NULL) {
    fprintf(stderr, EX_PROG ": out of memory; try fewer %s\n", smaller);
    exit(1);
  }
  return p;
}

/* ex_die -- "PROG: message" on stderr, then exit status 1. */
static inline void ex_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs(EX_PROG ": ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

/* ex_threads -- runs fn(item) on each of n items of size bytes, a thread
 * each, all released at once; while they run, calls watch(warg) until it
 * returns 0 (watch may be NULL); joins them all. Returns the seconds from
 * the release to the last join. Exits 1 when a thread cannot start (fewer
 * names the flag that sets n). */
typedef struct ex_go_s {
  pthread_barrier_t *go;
  void *(*fn)(void *);
  void *item;
} ex_go_t;

static inline void *ex_go(void *arg) {
  ex_go_t *g = arg;
  pthread_barrier_wait(g->go);
  return g->fn(g->item);
}

static inline double ex_threads(long n, void *items, size_t size,
                                void *(*fn)(void *), int (*watch)(void *),
                                void *warg, const char *fewer) {
  pthread_t *t = ex_calloc(n, sizeof *t, fewer);
  ex_go_t *g = ex_calloc(n, sizeof *g, fewer);
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, (unsigned)n + 1);
  for (long i = 0; i < n; i++) {
    g[i] = (ex_go_t){&go, fn, (char *)items + (size_t)i * size};
    if (pthread_create(&t[i], NULL, ex_go, &g[i]) != 0)
      ex_die("cannot start thread %ld; try fewer %s", i, fewer);
  }
  double t0 = ex_now_s(); /* before the release: main may run last */
  pthread_barrier_wait(&go);
  while (watch != NULL && watch(warg))
    ;
  for (long i = 0; i < n; i++)
    pthread_join(t[i], NULL);
  double secs = ex_now_s() - t0;
  pthread_barrier_destroy(&go);
  free(t);
  free(g);
  return secs;
}

/* ex_opt -- the value of flag name at argv[*i], as "--name V" or
 * "--name=V"; NULL when argv[*i] is not that flag. Exits 2 when the value
 * is missing. */
static inline const char *ex_opt(int argc, char **argv, int *i,
                                 const char *name) {
  size_t n = strlen(name);
  if (strncmp(argv[*i], name, n) != 0)
    return NULL;
  if (argv[*i][n] == '=')
    return argv[*i] + n + 1;
  if (argv[*i][n] != '\0')
    return NULL;
  if (*i + 1 < argc)
    return argv[++*i];
  fprintf(stderr, EX_PROG ": %s needs a value (see " EX_PROG " --help)\n",
          name);
  exit(2);
}

/* ex_num -- v as a whole number in lo..hi, or exit 2 saying what is
 * wanted. */
static inline long ex_num(const char *name, const char *v, long lo, long hi) {
  char *end;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (end == v || *end != '\0' || errno != 0 || n < lo || n > hi) {
    fprintf(stderr,
            EX_PROG ": bad value '%s' for %s: a whole number in %ld..%ld\n", v,
            name, lo, hi);
    exit(2);
  }
  return n;
}

/* ex_flags -- parses argv by spec, a list of flags "--name=LO..HI" (a
 * whole number in LO..HI, HI left out for LONG_MAX) or "--name" (a switch,
 * set to 1), the k-th stored in *to[k]. It also takes --backend URL (the
 * return value; mem:// when absent) and --help (usage on stdout, exit 0);
 * anything else exits 2 with a line naming the flags. */
static inline const char *ex_flags(int argc, char **argv, const char *usage,
                                   const char *spec, long *const *to) {
  const char *url = "mem://", *v;
  for (int i = 1; i < argc; i++) {
    if ((v = ex_opt(argc, argv, &i, "--backend"))) {
      url = v;
      continue;
    }
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(usage, stdout);
      exit(0);
    }
    int found = 0;
    long *const *t = to; /* the k-th flag's value */
    for (const char *p = spec; !found && *p != '\0'; t++) {
      char name[32], *end;
      size_t n = strcspn(p, "= ");
      snprintf(name, sizeof name, "%.*s", (int)n, p);
      p += n;
      if (*p == '=') { /* a number: "=LO..HI" or "=LO.." */
        long lo = strtol(p + 1, &end, 10), hi = LONG_MAX;
        p = end + 2; /* past ".." */
        if (*p >= '0' && *p <= '9')
          hi = strtol(p, &end, 10), p = end;
        if ((v = ex_opt(argc, argv, &i, name)))
          **t = ex_num(name, v, lo, hi), found = 1;
      } else if (strcmp(argv[i], name) == 0) {
        **t = 1, found = 1;
      }
      p += strspn(p, " ");
    }
    if (!found) {
      fprintf(stderr,
              EX_PROG ": unknown option '%s': the options are --backend",
              argv[i]);
      for (const char *p = spec; *p != '\0'; p += strspn(p, " ")) {
        fprintf(stderr, ", %.*s", (int)strcspn(p, "= "), p);
        p += strcspn(p, " ");
      }
      fputs(" (see " EX_PROG " --help)\n", stderr);
      exit(2);
    }
  }
  return url;
}

/* ex_shown -- url with any password starred out, for error lines. */
static inline const char *ex_shown(const char *url, char *buf, size_t cap) {
  const char *s = strstr(url, "://"), *at = strrchr(url, '@');
  const char *colon =
      s && at > s ? memchr(s + 3, ':', (size_t)(at - s - 3)) : NULL;
  if (colon == NULL)
    return url;
  snprintf(buf, cap, "%.*s***%s", (int)(colon + 1 - url), url, at);
  return buf;
}

/* ex_open -- ordo_open, where a URL ordo cannot parse is a usage error
 * (exit 2). A backend that does not answer is not, and on the remote ones
 * shows only at the first ordo_txn_begin: ordo_open connects to nothing. */
static inline int ex_open(ordo_t **o, const char *url) {
  char buf[512];
  int rc = ordo_open(o, url, NULL);
  if (rc == ORDO_EURL || rc == ORDO_EINVAL) {
    fprintf(stderr, EX_PROG ": bad backend URL '%s': accepted forms are %s\n",
            ex_shown(url, buf, sizeof buf), EX_URL_FORMS);
    exit(2);
  }
  return rc;
}

/* ex_unusable -- the line for a backend that could not be used (rc). */
static inline void ex_unusable(const char *url, int rc) {
  char buf[512];
  fprintf(stderr,
          EX_PROG ": cannot use backend '%s': %s (%s); check that its "
                  "server is running and that the URL's host, port, "
                  "database and password are right\n",
          ex_shown(url, buf, sizeof buf), ordo_strerror(rc), ordo_err_name(rc));
}

#endif
