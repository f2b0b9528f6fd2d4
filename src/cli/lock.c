/*
 * lock.c -- `ordo lock`: runs a command while holding keys of a lock place,
 * as flock(1) does for a file. It takes every key (X mode, all or nothing,
 * one ordo_lock_all), starts the command with each key's fencing token in
 * ORDO_FENCES, passes SIGINT, SIGTERM and SIGHUP on to it, stops it with
 * SIGTERM if the place reports the lease lost, and releases the keys when
 * it has exited. The lease is renewed meanwhile by the place itself (the
 * ordod:// backend's renewal thread). See README.md, "ordo lock".
 *
 * Interface:
 *   cli_lock_main   runs `ordo lock [options] KEY... -- COMMAND [ARGS...]`
 *   cli_lock_usage  prints the help of `ordo lock`, every flag
 *
 * Its exit statuses are those of sysexits.h (README.md, invariant 1): it
 * exits with its command's status, so its own must be ones a command
 * seldom uses.
 */
#include "cli/cli.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sysexits.h>
#include <unistd.h>

#include "ordo.h"

extern char **environ;

#define LOCK_DEFAULT_URL "ordod://127.0.0.1:7411"
#define LOCK_MAX_WAIT_MS 2147483647L
#define LOCK_MIN_TTL_MS 10L
#define LOCK_MAX_TTL_MS 86400000L

typedef struct lock_opts_s {
  const char *url;  /* --backend, else $ORDO_URL, else the default */
  long wait_ms;     /* --wait; ORDO_FOREVER when not given */
  long ttl_ms;      /* --ttl; 0 when not given */
  int keep_running; /* --keep-running */
  char **keys;      /* the KEY arguments (an array of argv's strings) */
  size_t nkeys;
  char **cmd; /* after "--", NULL-ended (argv's own end) */
} lock_opts_t;

void cli_lock_usage(FILE *f) {
  fputs(
      "usage: ordo lock [--backend URL] [--wait MS] [--ttl MS] "
      "[--keep-running]\n"
      "                 KEY... -- COMMAND [ARGS...]\n"
      "\n"
      "Takes every KEY from a lock place (exclusive, all or nothing, in the\n"
      "canonical order), runs COMMAND while holding them, and releases them\n"
      "when COMMAND has exited, however it ends. While it runs the place\n"
      "renews the lease. COMMAND finds each key's fencing token in\n"
      "ORDO_FENCES: 'key=token' pairs separated by spaces, in the canonical\n"
      "key order, with each byte of a key outside A-Za-z0-9._:/- written as\n"
      "%XX. SIGINT, SIGTERM and SIGHUP sent to ordo lock are passed on to\n"
      "COMMAND.\n"
      "\n"
      "Options:\n"
      "  --backend URL       the lock place: ordod://host:port,\n"
      "                      ordod://host:port?tls=1&tls_ca=FILE (TLS; with\n"
      "                      tls_cert=FILE&tls_key=FILE for a client\n"
      "                      certificate), ordod:///path/to/socket, or any\n"
      "                      form of 'ordo bank --help' (rediss:// too)\n"
      "                      (default: $ORDO_URL, else " LOCK_DEFAULT_URL ")\n"
      "  --wait MS           wait at most MS ms for the keys; 0 tries once\n"
      "                      (default: wait without end)\n"
      "  --ttl MS            the session's lease, 10..86400000 ms (ordod://;\n"
      "                      default: the server's)\n"
      "  --keep-running      if the lease is lost, let COMMAND run on (by\n"
      "                      default it gets SIGTERM)\n"
      "  -h, --help          print this help and exit\n"
      "\n"
      "Exit status: COMMAND's own (128+N when signal N ended it); 75 when\n"
      "the keys could not be had in time or the lease was lost (with\n"
      "--keep-running too); 69 when the backend cannot be reached; 64 bad\n"
      "usage; 126 or 127 when COMMAND could not be run.\n"
      "\n"
      "Examples:\n"
      "  ordo lock --wait 5000 deploy:web -- ./deploy.sh\n"
      "  ordo lock --wait 0 cron:report -- make report   "
      "# skip if running\n",
      f);
}

/* One line on stderr, the culprit named (README.md, invariant 1). */
static int usage_err(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static int usage_err(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("ordo lock: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputs(" (see 'ordo lock --help')\n", stderr);
  va_end(ap);
  return EX_USAGE;
}

/* A whole decimal number within [min, max]: no sign, no spaces. */
static int lock_num(const char *s, long min, long max, long *out) {
  if (*s < '0' || *s > '9')
    return -1;
  errno = 0;
  char *end;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < min || v > max)
    return -1;
  *out = v;
  return 0;
}

/*
 * lock_parse -- fills o from argv (argv[0] is "lock"). Options and keys,
 * in any order, come before "--", the command after it; a key cannot
 * start with '-'. Returns -1 to go on (o->keys is then the caller's to
 * free), else the exit status (0 after --help).
 */
static int lock_parse(int argc, char **argv, lock_opts_t *o) {
  memset(o, 0, sizeof *o);
  o->wait_ms = ORDO_FOREVER;
  int i = 1;
  for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
    const char *a = argv[i];
    if (a[0] != '-') {
      if (a[0] == 0)
        return usage_err("%s", "a KEY is empty: keys are 1..512 bytes");
      if (strlen(a) > ORDO_KEY_MAX_DEFAULT)
        return usage_err("KEY '%.40s...' is longer than 512 bytes", a);
      o->nkeys++;
      continue;
    }
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      cli_lock_usage(stdout);
      return 0;
    }
    if (strcmp(a, "--keep-running") == 0) {
      o->keep_running = 1;
      continue;
    }
    const char *eq = strchr(a, '=');
    size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
    int which = nlen == 9 && strncmp(a, "--backend", 9) == 0 ? 0
                : nlen == 6 && strncmp(a, "--wait", 6) == 0  ? 1
                : nlen == 5 && strncmp(a, "--ttl", 5) == 0   ? 2
                                                             : -1;
    if (which < 0)
      return usage_err("unknown option '%s': accepted options are --backend "
                       "URL, --wait MS, --ttl MS, --keep-running, --help",
                       a);
    const char *val = eq ? eq + 1 : NULL;
    if (!val) {
      if (i + 1 >= argc || strcmp(argv[i + 1], "--") == 0)
        return usage_err("option '%s' needs a value", a);
      val = argv[++i];
    }
    if (which == 0) {
      o->url = val;
    } else if (which == 1) {
      if (lock_num(val, 0, LOCK_MAX_WAIT_MS, &o->wait_ms))
        return usage_err("bad value '%s' for --wait: expected a whole "
                         "number of ms in 0..2147483647",
                         val);
    } else if (lock_num(val, LOCK_MIN_TTL_MS, LOCK_MAX_TTL_MS, &o->ttl_ms)) {
      return usage_err("bad value '%s' for --ttl: expected a whole number "
                       "of ms in 10..86400000",
                       val);
    }
  }
  const char *form = "write ordo lock [options] KEY... -- COMMAND [ARGS...]";
  if (o->nkeys == 0)
    return usage_err("no KEY given: %s", form);
  if (i >= argc)
    return usage_err("no '--' before the command: %s", form);
  if (i + 1 >= argc)
    return usage_err("no COMMAND after '--': %s", form);
  o->cmd = argv + i + 1;
  o->keys = malloc(o->nkeys * sizeof *o->keys);
  if (!o->keys) {
    fputs("ordo lock: out of memory\n", stderr);
    return EX_UNAVAILABLE;
  }
  size_t k = 0;
  for (int j = 1; j < i; j++) {
    if (argv[j][0] != '-') {
      o->keys[k++] = argv[j];
    } else if (strcmp(argv[j], "--keep-running") != 0 &&
               !strchr(argv[j], '=')) {
      j++; /* the option's value */
    }
  }
  if (!o->url) {
    const char *env = getenv("ORDO_URL");
    o->url = env && *env ? env : LOCK_DEFAULT_URL;
  }
  return -1;
}

/* Copies url with any password replaced by "***", for error lines. */
static void lock_redact(const char *url, char *out, size_t cap) {
  snprintf(out, cap, "%s", url);
  const char *auth = strstr(url, "://");
  if (!auth)
    return;
  auth += 3;
  size_t alen = strcspn(auth, "?#");
  const char *at = NULL;
  for (const char *p = auth; p < auth + alen; p++)
    if (*p == '@')
      at = p;
  const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
  if (colon)
    snprintf(out, cap, "%.*s***%s", (int)(colon + 1 - url), url, at);
}

/*
 * lock_url -- the URL to open into *out: with --ttl, lease_ms=N appended
 * to an ordod:// query (where the last one given wins). Returns -1, else
 * the exit status after its error line.
 */
static int lock_url(const lock_opts_t *o, char **out) {
  *out = NULL;
  if (o->ttl_ms == 0) {
    *out = strdup(o->url);
  } else if (strncmp(o->url, "ordod://", 8) != 0) {
    char shown[512];
    lock_redact(o->url, shown, sizeof shown);
    return usage_err("--ttl needs a place with leases (ordod://), not '%s'",
                     shown);
  } else if (asprintf(out, "%s%slease_ms=%ld", o->url,
                      strchr(o->url, '?') ? "&" : "?", o->ttl_ms) < 0) {
    *out = NULL;
  }
  if (!*out) {
    fputs("ordo lock: out of memory\n", stderr);
    return EX_UNAVAILABLE;
  }
  return -1;
}

/* ---- ORDO_FENCES ------------------------------------------------------- */

static int key_ptr_cmp(const void *a, const void *b) {
  const char *x = *(const char *const *)a, *y = *(const char *const *)b;
  return ordo_key_cmp(x, strlen(x), y, strlen(y));
}

/* Whether byte c stands for itself in ORDO_FENCES. */
static int fence_plain(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' ||
         c == '/' || c == '-';
}

/*
 * fences_env -- "ORDO_FENCES=k1=t1 k2=t2", the distinct keys in the
 * canonical order with each one's token. NULL when out of memory or a
 * token cannot be read (which would mean the keys are not held).
 */
static char *fences_env(ordo_txn_t *t, const lock_opts_t *o) {
  char **k = malloc(o->nkeys * sizeof *k);
  if (!k)
    return NULL;
  memcpy(k, o->keys, o->nkeys * sizeof *k);
  qsort(k, o->nkeys, sizeof *k, key_ptr_cmp);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) {
    free(k);
    return NULL;
  }
  fputs("ORDO_FENCES=", f);
  int ok = 1;
  for (size_t i = 0; i < o->nkeys && ok; i++) {
    if (i > 0 && strcmp(k[i], k[i - 1]) == 0)
      continue;
    uint64_t tok;
    if (ordo_fence(t, k[i], strlen(k[i]), &tok) != 0) {
      ok = 0;
      break;
    }
    if (i > 0)
      fputc(' ', f);
    for (const unsigned char *p = (const unsigned char *)k[i]; *p; p++) {
      if (fence_plain(*p))
        fputc(*p, f);
      else
        fprintf(f, "%%%02X", *p);
    }
    fprintf(f, "=%llu", (unsigned long long)tok);
  }
  fclose(f);
  free(k);
  if (!ok) {
    free(buf);
    return NULL;
  }
  return buf;
}

/* environ without any ORDO_FENCES, and fences at the end. */
static char **child_env(char *fences) {
  size_t n = 0;
  while (environ[n])
    n++;
  char **env = malloc((n + 2) * sizeof *env);
  if (!env)
    return NULL;
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "ORDO_FENCES=", 12) != 0)
      env[m++] = environ[i];
  env[m++] = fences;
  env[m] = NULL;
  return env;
}

/* ---- Running the command -------------------------------------------------
 */

/*
 * What the lease-lost callback shares with the main thread: lost (atomic)
 * is set by the callback, on the place's renewal thread, which then sends
 * SIGUSR1 to the main thread; the main thread, which keeps SIGUSR1 blocked
 * and takes it with sigtimedwait, reads lost. No lock is involved.
 */
typedef struct lock_state_s {
  pthread_t main_thread; /* read-only after set */
  atomic_int lost;
} lock_state_t;

static void lock_lost_cb(ordo_txn_t *t, void *arg) {
  (void)t;
  lock_state_t *s = arg;
  atomic_store(&s->lost, 1);
  pthread_kill(s->main_thread, SIGUSR1);
}

/*
 * lock_wait_child -- waits for the command to exit, passing on SIGINT,
 * SIGTERM and SIGHUP (unless the terminal sent them: then the command, in
 * the same foreground process group, has had them already), and sending
 * it SIGTERM once when the lease is lost (unless keep_running). The signals
 * are blocked and taken here with sigtimedwait, so nothing runs in a signal
 * handler. Returns the wait status.
 */
static int lock_wait_child(pid_t pid, const sigset_t *set, lock_state_t *s,
                           int keep_running) {
  int told = 0;
  for (;;) {
    siginfo_t si;
    /* A second's bound, in case a thread of ours that does not block
     * SIGCHLD took it: the child is then looked for all the same. */
    struct timespec sec = {1, 0};
    int sig = sigtimedwait(set, &si, &sec);
    if (sig < 0 && errno != EAGAIN)
      continue; /* EINTR */
    if (sig < 0 || sig == SIGCHLD) {
      int st;
      pid_t w = waitpid(pid, &st, WNOHANG);
      if (w == pid && (WIFEXITED(st) || WIFSIGNALED(st)))
        return st;
      continue;
    }
    if (sig == SIGUSR1) {
      if (atomic_load(&s->lost) && !told) {
        told = 1;
        fprintf(stderr,
                "ordo lock: the lease was lost: the keys are no longer "
                "held; %s\n",
                keep_running ? "the command runs on (--keep-running)"
                             : "sending SIGTERM to the command");
        if (!keep_running)
          kill(pid, SIGTERM);
      }
      continue;
    }
    if (si.si_code != SI_KERNEL)
      kill(pid, sig);
  }
}

/* The exit status of a failed ordo_lock_all (README.md, invariant 1). */
static int lock_fail_status(int rc, const lock_opts_t *o) {
  if (rc == ORDO_EINVAL) {
    fputs("ordo lock: bad KEY: keys are 1..512 bytes (see 'ordo lock "
          "--help')\n",
          stderr);
    return EX_USAGE;
  }
  if (ordo_is_retryable(rc)) {
    if (o->wait_ms == 0)
      fprintf(stderr, "ordo lock: the keys are held elsewhere (--wait 0 "
                      "tried once)\n");
    else
      fprintf(stderr,
              "ordo lock: could not take the keys within %ld ms: "
              "%s\n",
              o->wait_ms, ordo_strerror(rc));
    return EX_TEMPFAIL;
  }
  fprintf(stderr, "ordo lock: could not take the keys: %s (%s)\n",
          ordo_strerror(rc), ordo_err_name(rc));
  return EX_UNAVAILABLE;
}

/*
 * lock_run -- with the keys held: starts the command, waits for it, and
 * returns the exit status. The caller releases the keys afterwards.
 */
static int lock_run(ordo_txn_t *t, const lock_opts_t *o, lock_state_t *s,
                    const sigset_t *orig) {
  char *fences = fences_env(t, o);
  char **env = fences ? child_env(fences) : NULL;
  if (!env) {
    fputs("ordo lock: cannot build ORDO_FENCES: out of memory, or the keys "
          "are no longer held\n",
          stderr);
    free(fences);
    return atomic_load(&s->lost) ? EX_TEMPFAIL : EX_UNAVAILABLE;
  }
  /* From here SIGINT, SIGTERM, SIGHUP and SIGCHLD wait for sigtimedwait;
   * SIGUSR1 (the lease) has been blocked since before the place opened. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setsigmask(&attr, orig); /* the command gets ours */
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid;
  int err = posix_spawnp(&pid, o->cmd[0], NULL, &attr, o->cmd, env);
  posix_spawnattr_destroy(&attr);
  free(env);
  free(fences);
  int rc;
  if (err != 0) {
    fprintf(stderr, "ordo lock: cannot run '%s': %s\n", o->cmd[0],
            strerror(err));
    rc = err == ENOENT ? 127 : 126;
  } else {
    int st = lock_wait_child(pid, &set, s, o->keep_running);
    rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  /* The command has exited: SIGINT, SIGTERM and SIGHUP may end us again
   * (should the release hang, a kill still works; the server releases a
   * closed session's keys). SIGUSR1 stays blocked: a late one from the
   * renewal thread must not end us. */
  sigset_t after = *orig;
  sigaddset(&after, SIGUSR1);
  pthread_sigmask(SIG_SETMASK, &after, NULL);
  return rc;
}

/*
 * lock_place -- opens the place, begins the txn, takes the keys, runs the
 * command and releases the keys. Returns the exit status. Every path
 * after the txn began ends it, which releases whatever it still holds.
 */
static int lock_place(const lock_opts_t *o, const char *url,
                      const sigset_t *orig) {
  lock_state_t s;
  s.main_thread = pthread_self();
  atomic_init(&s.lost, 0);
  char shown[512];
  lock_redact(url, shown, sizeof shown);
  ordo_t *pl = NULL;
  int rc = ordo_open(&pl, url, NULL);
  if (rc == ORDO_EURL || rc == ORDO_EINVAL) {
    fprintf(stderr,
            "ordo lock: unknown or malformed backend URL '%s': accepted "
            "forms are %s (see 'ordo lock --help')\n",
            shown, CLI_URL_FORMS);
    return EX_USAGE;
  }
  if (rc != 0) {
    fprintf(stderr, "ordo lock: cannot open backend '%s': %s\n", shown,
            ordo_strerror(rc));
    return EX_UNAVAILABLE;
  }
  ordo_txn_t *t = NULL;
  rc = ordo_txn_begin(pl, &t, NULL);
  if (rc == ORDO_EAUTH) {
    fprintf(stderr,
            "ordo lock: backend '%s' refused us: %s (EAUTH); check the "
            "password in the URL\n",
            shown, ordo_strerror(rc));
    ordo_close(pl);
    return EX_UNAVAILABLE;
  }
  if (rc != 0) {
    fprintf(stderr,
            "ordo lock: cannot reach backend '%s': %s (%s); check that it "
            "is running and reachable\n",
            shown, ordo_strerror(rc), ordo_err_name(rc));
    ordo_close(pl);
    return EX_UNAVAILABLE;
  }
  ordo_on_lease_lost(pl, lock_lost_cb, &s);
  int status;
  ordo_req_t *reqs = malloc(o->nkeys * sizeof *reqs);
  if (!reqs) {
    fputs("ordo lock: out of memory\n", stderr);
    status = EX_UNAVAILABLE;
    goto end;
  }
  for (size_t i = 0; i < o->nkeys; i++)
    reqs[i] = (ordo_req_t){o->keys[i], strlen(o->keys[i]), ORDO_MODE_X};
  rc = ordo_lock_all(t, reqs, o->nkeys, o->wait_ms);
  free(reqs);
  if (rc != 0) {
    status = lock_fail_status(rc, o);
    goto end;
  }
  status = lock_run(t, o, &s, orig);
  int ur = ordo_unlock_all(t);
  if (atomic_load(&s.lost) || ur == ORDO_ELEASE) {
    if (!atomic_load(&s.lost))
      fputs("ordo lock: the lease was lost while the command ran\n", stderr);
    status = EX_TEMPFAIL;
  } else if (ur < 0) {
    fprintf(stderr,
            "ordo lock: releasing the keys failed: %s; the server frees "
            "them when the session ends\n",
            ordo_strerror(ur));
  }
end:
  /* After txn_end no callback runs for t: s may go. */
  ordo_on_lease_lost(pl, NULL, NULL);
  ordo_txn_end(t);
  ordo_close(pl);
  return status;
}

int cli_lock_main(int argc, char **argv) {
  lock_opts_t o;
  int rc = lock_parse(argc, argv, &o);
  if (rc >= 0)
    return rc;
  char *url;
  if ((rc = lock_url(&o, &url)) >= 0) {
    free(o.keys);
    return rc;
  }
  /* Children must be waited for here, whatever our parent set. SIGUSR1
   * (the lease-lost news) is blocked before the place's thread exists and
   * taken only by sigtimedwait, so it can never end the process. */
  signal(SIGCHLD, SIG_DFL);
  sigset_t orig, usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, &orig);
  rc = lock_place(&o, url, &orig);
  free(url);
  free(o.keys);
  return rc;
}
