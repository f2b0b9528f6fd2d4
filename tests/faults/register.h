/*
 * register.h -- the fenced register of the fault harness (tests/faults/,
 * docs/reliability.md): one counter in a file that accepts a write only
 * with a fencing token greater than the last accepted one, the storage
 * side of the fencing pattern in docs/backend-*.md. Every process of a run
 * opens the same file; flock(2) makes each read and each write atomic.
 * Every write, accepted or refused, is appended to the file's log
 * (PATH.log), which tests/faults/check.py reads.
 *
 * Interface: freg_open, freg_close, freg_read, freg_write.
 */
#ifndef ORDO_FAULTS_REGISTER_H
#define ORDO_FAULTS_REGISTER_H

#include <stdint.h>

typedef struct freg_s {
  int fd;     /* the register: struct freg_state at offset 0 */
  int log_fd; /* PATH.log, O_APPEND */
} freg_t;

/* The register's state on disk. */
typedef struct freg_state_s {
  uint64_t last_token; /* the token of the last accepted write (0: none) */
  int64_t value;       /* the counter */
  uint64_t accepted;   /* how many writes were accepted */
} freg_state_t;

/* Opens (creating, zeroed, when absent) the register at path. 0 or -errno. */
int freg_open(freg_t *r, const char *path);
void freg_close(freg_t *r);
/* Reads the counter (and, when st is not NULL, the whole state). */
int freg_read(freg_t *r, int64_t *value, freg_state_t *st);
/*
 * freg_write -- sets the counter to value if token > last_token; read is
 * the value the writer read before (logged, so the checker can see a lost
 * update: an accepted write whose read is not the value it replaced).
 * Returns 1 if accepted, 0 if refused, -errno on an I/O error. *now_ns gets
 * the CLOCK_MONOTONIC time of the decision.
 */
int freg_write(freg_t *r, uint64_t token, int64_t read, int64_t value,
               uint64_t *now_ns);

#endif
