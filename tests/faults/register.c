/*
 * register.c -- the fenced register (see register.h and
 * docs/reliability.md): a counter in a file, fenced by token.
 *
 * Interface: freg_open, freg_close, freg_read, freg_write.
 */
#include "register.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* flock that retries on EINTR: a signal must not make a write unlocked. */
static int lock_fd(int fd, int op) {
  while (flock(fd, op) != 0) {
    if (errno != EINTR)
      return -errno;
  }
  return 0;
}

static int load(int fd, freg_state_t *st) {
  ssize_t n = pread(fd, st, sizeof *st, 0);
  if (n < 0)
    return -errno;
  if (n == 0) {
    memset(st, 0, sizeof *st); /* a new register */
    return 0;
  }
  return n == (ssize_t)sizeof *st ? 0 : -EIO;
}

int freg_open(freg_t *r, const char *path) {
  char lp[4096];
  if (snprintf(lp, sizeof lp, "%s.log", path) >= (int)sizeof lp)
    return -ENAMETOOLONG;
  r->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (r->fd < 0)
    return -errno;
  r->log_fd = open(lp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (r->log_fd < 0) {
    int e = -errno;
    close(r->fd);
    return e;
  }
  return 0;
}

void freg_close(freg_t *r) {
  close(r->fd);
  close(r->log_fd);
}

int freg_read(freg_t *r, int64_t *value, freg_state_t *out) {
  freg_state_t st;
  int rc = lock_fd(r->fd, LOCK_SH);
  if (rc)
    return rc;
  rc = load(r->fd, &st);
  lock_fd(r->fd, LOCK_UN);
  if (rc)
    return rc;
  *value = st.value;
  if (out)
    *out = st;
  return 0;
}

int freg_write(freg_t *r, uint64_t token, int64_t read, int64_t value,
               uint64_t *now_ns) {
  freg_state_t st;
  int rc = lock_fd(r->fd, LOCK_EX);
  if (rc)
    return rc;
  rc = load(r->fd, &st);
  int accepted = 0;
  int64_t prev = st.value;
  uint64_t last = st.last_token;
  if (rc == 0 && token > st.last_token) {
    st.last_token = token;
    st.value = value;
    st.accepted++;
    if (pwrite(r->fd, &st, sizeof st, 0) != (ssize_t)sizeof st)
      rc = errno ? -errno : -EIO;
    else
      accepted = 1;
  }
  uint64_t now = mono_ns();
  if (rc == 0) {
    /* The log line is written inside the lock, so the log's order is the
     * register's order of decisions. */
    char line[160];
    int n = snprintf(line, sizeof line,
                     "%" PRIu64 " %" PRIu64 " %" PRId64 " %" PRId64 " %" PRId64
                     " %d %" PRIu64 "\n",
                     now, token, read, prev, value, accepted, last);
    if (write(r->log_fd, line, (size_t)n) != n)
      rc = errno ? -errno : -EIO;
  }
  lock_fd(r->fd, LOCK_UN);
  if (now_ns)
    *now_ns = now;
  return rc ? rc : accepted;
}
