/*
 * it_redis.h -- what the tests of the Redis-backed places (test_redis.c,
 * test_redlock.c) share: the wrappers' environment, a stale holder's
 * process and a bounded line read from it, ordo_dump's text, and side
 * connections to a node for looking at its keys. Header-only, for test
 * programs; every wait is bounded, and every bound against a hang grows
 * with ORDO_TEST_TIMEOUT_MULT (tu_ms).
 *
 *   it_env(name, wrapper)       an environment variable the wrapper script
 *                               exports; the case fails, naming both, when
 *                               it is missing (a server the wrapper did not
 *                               start is a failure, never a skip)
 *   it_env_port(name, wrapper)  the same, as a port number (1..65535)
 *   it_stale_child(url, key)    the body of "--stale-child URL KEY": locks
 *                               KEY, says "locked TOKEN", waits for a line,
 *                               unlocks, says "unlock OK|ERRNAME"
 *   it_read_line(fd, ...)       one line within a bound, false on time-out
 *   it_reap(pid, ms)            waits (bounded) for a child to end; kills
 *                               it (SIGCONT, SIGKILL) when it does not
 *   it_dump_text(o, buf, cap)   ordo_dump into buf (NUL-terminated)
 *   it_side(port, pass)         a blocking hiredis connection (5 s bound)
 *   it_int(c, fmt, ...)         a command whose reply must be an integer
 *   it_ms_since(t0)             milliseconds since tu_now_ns() was t0
 *   it_stale_holder(url, key, t)
 *                               the stale holder's story: a child process
 *                               locks key, is stopped (SIGSTOP) past its
 *                               lease, t takes key, the child runs again
 *                               and its unlock must say ORDO_ELEASE; the
 *                               child runs again and is reaped whatever
 *                               fails (no assertion between its SIGSTOP
 *                               and its SIGCONT)
 *   it_proxy_start(p, port)     a TCP proxy on a free loopback port
 *                               (p->port) to 127.0.0.1:port, on a thread of
 *                               its own: it passes bytes both ways until
 *                               told otherwise (p->mode): IT_CUT_REPLY
 *                               passes the next request of any connection
 *                               on, throws its reply away and closes both
 *                               sides (a reply lost with its connection);
 *                               IT_BLACKHOLE accepts new connections and
 *                               never reads from or writes to them (a
 *                               black-holed node). it_proxy_stop ends it.
 *   getrandom(buf, len, flags)  the program's own getrandom(2), which the
 *                               library (linked in statically) calls
 *                               instead of libc's: it counts the calls
 *                               (it_getrandom_calls) and fails with ENOSYS,
 *                               as a kernel without the call does, while
 *                               it_no_getrandom is set
 *   it_owner_random(o)          asserts a txn's owner comes from getrandom
 *                               and that without it ordo_txn_begin fails
 */
#ifndef ORDO_IT_REDIS_H
#define ORDO_IT_REDIS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../common/testutil.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

enum { IT_PASS, IT_CUT_REPLY, IT_BLACKHOLE };
#define IT_PROXY_MAX 32

typedef struct it_proxy {
  int lfd, port, target;
  pthread_t th;
  _Atomic bool stop;
  _Atomic int mode;
  _Atomic unsigned accepted, cuts;
  /* The thread's own: connection pairs (client, server), -1 when unused;
   * a pair whose reply is to be thrown away; black-holed sockets. */
  int cl[IT_PROXY_MAX], sv[IT_PROXY_MAX];
  bool cut[IT_PROXY_MAX];
  int hole[IT_PROXY_MAX];
} it_proxy;

static inline void it_proxy_close_pair(it_proxy *p, int i) {
  close(p->cl[i]);
  close(p->sv[i]);
  p->cl[i] = p->sv[i] = -1;
  p->cut[i] = false;
}

/* Passes what one side sent to the other; false when the pair is done. */
static inline bool it_proxy_pass(it_proxy *p, int i, bool from_client) {
  char buf[65536];
  int from = from_client ? p->cl[i] : p->sv[i];
  int to = from_client ? p->sv[i] : p->cl[i];
  ssize_t n = read(from, buf, sizeof buf);
  if (n <= 0)
    return false;
  if (!from_client && p->cut[i]) {
    atomic_fetch_add(&p->cuts, 1); /* the reply is lost with the pair */
    return false;
  }
  if (from_client) {
    int want = IT_CUT_REPLY;
    if (atomic_compare_exchange_strong(&p->mode, &want, IT_PASS))
      p->cut[i] = true;
  }
  for (ssize_t o = 0; o < n;) {
    ssize_t w = send(to, buf + o, (size_t)(n - o), MSG_NOSIGNAL);
    if (w <= 0)
      return false;
    o += w;
  }
  return true;
}

static inline void *it_proxy_main(void *arg) {
  it_proxy *p = arg;
  while (!atomic_load(&p->stop)) {
    struct pollfd fds[1 + 2 * IT_PROXY_MAX];
    int who[1 + 2 * IT_PROXY_MAX];
    nfds_t m = 0;
    fds[m].fd = p->lfd;
    fds[m].events = POLLIN;
    who[m++] = -1;
    for (int i = 0; i < IT_PROXY_MAX; i++)
      if (p->cl[i] >= 0) {
        fds[m].fd = p->cl[i];
        fds[m].events = POLLIN;
        who[m++] = 2 * i;
        fds[m].fd = p->sv[i];
        fds[m].events = POLLIN;
        who[m++] = 2 * i + 1;
      }
    if (poll(fds, m, 20) <= 0)
      continue;
    for (nfds_t j = 1; j < m; j++) {
      int i = who[j] / 2;
      if (fds[j].revents && p->cl[i] >= 0 &&
          !it_proxy_pass(p, i, who[j] % 2 == 0))
        it_proxy_close_pair(p, i);
    }
    if (fds[0].revents & POLLIN) {
      int c = accept(p->lfd, NULL, NULL);
      if (c < 0)
        continue;
      atomic_fetch_add(&p->accepted, 1);
      int slot = -1;
      bool hole = atomic_load(&p->mode) == IT_BLACKHOLE;
      for (int i = 0; i < IT_PROXY_MAX && slot < 0; i++)
        if (hole ? p->hole[i] < 0 : p->cl[i] < 0)
          slot = i;
      if (slot < 0) {
        close(c);
        continue;
      }
      if (hole) {
        p->hole[slot] = c; /* kept open, never read */
        continue;
      }
      int s = socket(AF_INET, SOCK_STREAM, 0);
      struct sockaddr_in a = {0};
      a.sin_family = AF_INET;
      a.sin_port = htons((uint16_t)p->target);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        if (s >= 0)
          close(s);
        close(c);
        continue;
      }
      p->cl[slot] = c;
      p->sv[slot] = s;
    }
  }
  for (int i = 0; i < IT_PROXY_MAX; i++) {
    if (p->cl[i] >= 0)
      it_proxy_close_pair(p, i);
    if (p->hole[i] >= 0)
      close(p->hole[i]);
  }
  close(p->lfd);
  return NULL;
}

static inline void it_proxy_start(it_proxy *p, int target) {
  memset(p, 0, sizeof *p);
  for (int i = 0; i < IT_PROXY_MAX; i++)
    p->cl[i] = p->sv[i] = p->hole[i] = -1;
  p->target = target;
  p->lfd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(p->lfd >= 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof a;
  assert_int_equal(bind(p->lfd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(p->lfd, 64), 0);
  assert_int_equal(getsockname(p->lfd, (struct sockaddr *)&a, &al), 0);
  p->port = ntohs(a.sin_port);
  assert_int_equal(pthread_create(&p->th, NULL, it_proxy_main, p), 0);
}

static inline void it_proxy_stop(it_proxy *p) {
  atomic_store(&p->stop, true);
  pthread_join(p->th, NULL); /* its poll wakes every 20 ms */
}

/* Owner values must come from the kernel (getrandom), never from a
 * predictable generator: these let a case see that they do, and that a
 * txn is refused when the kernel gives none. */
static _Atomic bool it_no_getrandom;
static _Atomic unsigned it_getrandom_calls;
ssize_t getrandom(void *buf, size_t len, unsigned int flags) {
  atomic_fetch_add(&it_getrandom_calls, 1);
  if (atomic_load(&it_no_getrandom)) {
    errno = ENOSYS;
    return -1;
  }
  return syscall(SYS_getrandom, buf, len, flags);
}

static inline const char *it_env(const char *name, const char *wrapper) {
  const char *s = getenv(name);
  if (!s || !*s)
    fail_msg("%s is not set: %s starts the server(s) and exports it; run "
             "this test through it (ctest does)",
             name, wrapper);
  return s;
}

static inline int it_env_port(const char *name, const char *wrapper) {
  const char *s = it_env(name, wrapper);
  char *end;
  long v = strtol(s, &end, 10);
  if (*end || v < 1 || v > 65535)
    fail_msg("%s is '%s', not a port number (%s exports it)", name, s, wrapper);
  return (int)v;
}

static inline int it_stale_child(const char *url, const char *key) {
  ordo_t *o;
  ordo_txn_t *t;
  uint64_t tok = 0;
  if (ordo_open(&o, url, NULL) != 0 || ordo_txn_begin(o, &t, NULL) != 0 ||
      ordo_lock(t, key, strlen(key), ORDO_MODE_X, 2000) != 0 ||
      ordo_fence(t, key, strlen(key), &tok) != 0)
    return 2;
  printf("locked %llu\n", (unsigned long long)tok);
  fflush(stdout);
  char line[64];
  if (!fgets(line, sizeof line, stdin))
    return 3;
  int rc = ordo_unlock(t, key, strlen(key));
  printf("unlock %s\n", rc == 0 ? "OK" : ordo_err_name(rc));
  fflush(stdout);
  ordo_txn_end(t);
  ordo_close(o);
  return 0;
}

static inline bool it_read_line(int fd, char *buf, size_t cap, int ms) {
  size_t n = 0;
  uint64_t end = tu_now_ns() + (uint64_t)ms * 1000000u;
  while (n + 1 < cap) {
    uint64_t now = tu_now_ns();
    if (now >= end)
      return false;
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, (int)((end - now) / 1000000u) + 1) <= 0)
      continue;
    ssize_t r = read(fd, buf + n, 1);
    if (r <= 0)
      return false;
    if (buf[n] == '\n') {
      buf[n] = 0;
      return true;
    }
    n++;
  }
  return false;
}

/* Waits up to ms for pid to end; a child still there then is let run
 * (SIGCONT, were it stopped) and killed (SIGKILL), and reaped. Returns its
 * wait status, or -1 when it had to be killed. */
static inline int it_reap(pid_t pid, int ms) {
  int st = 0;
  uint64_t end = tu_now_ns() + (uint64_t)ms * 1000000u;
  for (;;) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid)
      return st;
    if (r < 0 || tu_now_ns() >= end)
      break;
    tu_sleep_us(5000);
  }
  kill(pid, SIGCONT);
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0); /* SIGKILL ends it: this wait is bounded */
  return -1;
}

static inline void it_dump_text(ordo_t *o, char *buf, size_t cap) {
  FILE *f = tmpfile();
  assert_non_null(f);
  ordo_dump(o, fileno(f));
  rewind(f);
  size_t n = fread(buf, 1, cap - 1, f);
  buf[n] = 0;
  fclose(f);
}

static inline redisContext *it_side(int port, const char *pass) {
  struct timeval tv = {5, 0};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
  assert_non_null(c);
  if (c->err)
    print_error("side connection: %s\n", c->errstr);
  assert_int_equal(c->err, 0);
  if (pass) {
    redisReply *r = redisCommand(c, "AUTH %s", pass);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
  }
  return c;
}

static inline long long it_int(redisContext *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(c, fmt, ap);
  va_end(ap);
  assert_non_null(r);
  if (r->type != REDIS_REPLY_INTEGER)
    print_error("expected an integer, got type %d (%s)\n", r->type,
                r->type == REDIS_REPLY_ERROR ? r->str : "");
  assert_int_equal(r->type, REDIS_REPLY_INTEGER);
  long long v = r->integer;
  freeReplyObject(r);
  return v;
}

static inline uint64_t it_ms_since(uint64_t t0) {
  return (tu_now_ns() - t0) / 1000000u;
}

/* The program running it must call it_stale_child when started as
 * "--stale-child URL KEY". t takes key after the child's lease ran out
 * (the wait bounded by 3 s, scaled) with a greater token than the
 * child's. Nothing is asserted while the child is stopped: what happens
 * meanwhile is recorded, the child is let run again (SIGCONT) and told to
 * go on, and only then is it all checked; a child that does not end in
 * time is killed before the checks. */
static inline void it_stale_holder(const char *url, const char *key,
                                   ordo_txn_t *t) {
  size_t klen = strlen(key);
  int to_child[2], from_child[2];
  assert_int_equal(pipe(to_child), 0);
  assert_int_equal(pipe(from_child), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    close(to_child[1]);
    close(from_child[0]);
    execl("/proc/self/exe", "stale-child", "--stale-child", url, key,
          (char *)NULL);
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  const char *why = NULL; /* the first thing that went wrong */
  char line[128] = "", last[128] = "";
  unsigned long long child_tok = 0;
  int lock_rc = 1, fence_rc = 1, cont_rc = 0;
  uint64_t tok = 0, waited_ns = 0;
  if (!it_read_line(from_child[0], line, sizeof line, (int)tu_ms(5000)))
    why = "the child said nothing within 5 s";
  else if (sscanf(line, "locked %llu", &child_tok) != 1)
    why = "the child's first line is not 'locked TOKEN'";
  else if (kill(pid, SIGSTOP) != 0)
    why = "SIGSTOP of the child failed";
  if (!why) {
    uint64_t t0 = tu_now_ns();
    lock_rc = ordo_lock(t, key, klen, ORDO_MODE_X, (long)tu_ms(3000));
    waited_ns = tu_now_ns() - t0;
    if (lock_rc == 0)
      fence_rc = ordo_fence(t, key, klen, &tok);
    cont_rc = kill(pid, SIGCONT);
    if (write(to_child[1], "go\n", 3) != 3)
      why = "the child cannot be told to go on";
    else if (!it_read_line(from_child[0], last, sizeof last, (int)tu_ms(5000)))
      why = "the child did not say how its unlock went within 5 s";
  }
  close(to_child[1]); /* a child still reading stdin ends now */
  close(from_child[0]);
  int st = it_reap(pid, (int)tu_ms(5000));
  if (why)
    fail_msg("stale holder: %s (its line: '%s')", why, line);
  assert_int_equal(cont_rc, 0);
  assert_int_equal(lock_rc, 0);
  /* It waited out the stale lease. */
  assert_true(waited_ns >= 100 * 1000000ull);
  assert_int_equal(fence_rc, 0);
  assert_true(tok > child_tok);
  assert_string_equal(last, "unlock ELEASE");
  assert_true(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* A txn of o names its owner from getrandom(2) (the interposed getrandom
 * above counts the calls), and without the kernel's random bits
 * ordo_txn_begin fails with ORDO_EBACKEND instead of naming the owner from a
 * predictable generator (test_owner_random of test_redis and test_redlock). */
static inline void it_owner_random(ordo_t *o) {
  unsigned before = atomic_load(&it_getrandom_calls);
  ordo_txn_t *t = NULL;
  assert_int_equal(ordo_txn_begin(o, &t, NULL), 0);
  assert_true(atomic_load(&it_getrandom_calls) > before);
  ordo_txn_end(t);
  atomic_store(&it_no_getrandom, true);
  ordo_txn_t *u = NULL;
  int rc = ordo_txn_begin(o, &u, NULL);
  atomic_store(&it_no_getrandom, false);
  if (rc == 0)
    ordo_txn_end(u);
  if (rc != ORDO_EBACKEND)
    print_error("ordo_txn_begin without getrandom -> %s, not EBACKEND\n",
                rc == 0 ? "0 (an owner from a predictable generator)"
                        : ordo_err_name(rc));
  assert_int_equal(rc, ORDO_EBACKEND);
}

#endif
