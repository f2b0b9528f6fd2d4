/*
 * progress.c -- the progress bar the CLI draws on stderr while a long run
 * works, and the CLI's monotonic clock. See README.md ("Progress bar").
 *
 * Interface:
 *   cli_progress_start  start the drawing thread if stderr is a terminal
 *   cli_progress_stop   stop it, join it, erase the bar
 *   cli_now             seconds on the monotonic clock
 *
 * The bar is drawn by a thread of its own that polls a read callback, so the
 * threads doing the work never block on, or even know about, the bar.
 */
#include "cli/cli.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* At most this many redraws a second (README.md, invariant 7). */
#define PROGRESS_HZ 10
#define PROGRESS_WIDTH 30

static double ts_seconds(const struct timespec *ts) {
  return (double)ts->tv_sec + (double)ts->tv_nsec / 1e9;
}

double cli_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts_seconds(&ts);
}

/*
 * progress_draw -- writes one frame: "\r", the bar, then an erase-to-end so a
 * shorter frame leaves no tail of the previous one.
 */
static void progress_draw(const cli_progress_t *p, double elapsed) {
  uint64_t done = p->read(p->arg);
  if (done > p->total)
    done = p->total;
  unsigned filled =
      p->total ? (unsigned)(done * PROGRESS_WIDTH / p->total) : PROGRESS_WIDTH;
  char bar[PROGRESS_WIDTH + 1];
  for (unsigned i = 0; i < PROGRESS_WIDTH; i++)
    bar[i] = i < filled ? '#' : '.';
  bar[PROGRESS_WIDTH] = '\0';
  unsigned pct = p->total ? (unsigned)(done * 100 / p->total) : 100;
  fprintf(stderr, "\r%s [%s] %3u%% %llu/%llu %.1fs\033[K", p->label, bar, pct,
          (unsigned long long)done, (unsigned long long)p->total, elapsed);
  fflush(stderr);
}

/*
 * progress_thread -- draws a frame, then sleeps a tick, until stop is set.
 * The first frame is drawn even when the work is already over, so a terminal
 * always shows the bar once. The next tick is counted from the end of the
 * draw, never from a schedule, so a thread that was descheduled does not
 * catch up with a burst of frames (invariant 7). It sleeps on the condition
 * variable rather than in nanosleep so that stop wakes it at once.
 */
static void *progress_thread(void *arg) {
  cli_progress_t *p = arg;
  int stop = 0;
  while (!stop) {
    progress_draw(p, cli_now() - ts_seconds(&p->t0));
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    next.tv_nsec += 1000000000L / PROGRESS_HZ;
    if (next.tv_nsec >= 1000000000L) {
      next.tv_sec++;
      next.tv_nsec -= 1000000000L;
    }
    ordo__mutex_lock(&p->mu);
    while (!p->stop && ordo__cond_timedwait(&p->cv, &p->mu, &next) != ETIMEDOUT)
      ;
    stop = p->stop;
    ordo__mutex_unlock(&p->mu);
  }
  return NULL;
}

void cli_progress_start(cli_progress_t *p, const char *label, uint64_t total,
                        cli_progress_read_cb read, void *arg) {
  memset(p, 0, sizeof(*p));
  p->label = label;
  p->total = total;
  p->read = read;
  p->arg = arg;
  /* A bar in a pipe or a log file is noise (README.md, invariant 7). */
  if (!isatty(STDERR_FILENO))
    return;
  pthread_condattr_t ca;
  if (pthread_condattr_init(&ca) != 0)
    return;
  /* Timed waits use CLOCK_MONOTONIC so a clock change cannot stall the bar. */
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  int rc = pthread_cond_init(&p->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (rc != 0)
    return;
  if (ordo__mutex_init(&p->mu) != 0) {
    pthread_cond_destroy(&p->cv);
    return;
  }
  clock_gettime(CLOCK_MONOTONIC, &p->t0);
  if (pthread_create(&p->thread, NULL, progress_thread, p) != 0) {
    ordo__mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    return;
  }
  p->active = 1;
}

void cli_progress_stop(cli_progress_t *p) {
  if (!p->active)
    return;
  ordo__mutex_lock(&p->mu);
  p->stop = 1;
  pthread_cond_signal(&p->cv);
  ordo__mutex_unlock(&p->mu);
  pthread_join(p->thread, NULL);
  ordo__mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  p->active = 0;
  /* Erase the bar so the summary that follows starts on a clean line. */
  fputs("\r\033[K", stderr);
  fflush(stderr);
}
