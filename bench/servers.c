/*
 * servers.c -- starts and stops the servers that server rows measure
 * (ordod, ordo's lock server, and redis-server as its peer), each on a free
 * port of 127.0.0.1 in a temporary folder of its own; see README.md.
 *
 *   ordod         the build's own binary (ORDO_BENCH_ORDOD, the path CMake
 *                 passes, or ../ordod next to bench/ordo_bench), started as
 *                 `ordod --port 0 --dir TMP --verbose 0`; its port is the N
 *                 of the `ready port=N` line it prints once it listens.
 *   redis-server  from PATH. Redis cannot take port 0, so the port is one
 *                 the kernel handed out to a socket bound to port 0 and
 *                 closed again; started as `redis-server --port P --save ''
 *                 --appendonly no --dir TMP --daemonize no --bind
 *                 127.0.0.1`, and ready once it answers PING. Should another
 *                 program take the port in between, it is tried again with
 *                 a new one.
 *
 * Both get the same treatment: no CPU pinning, no priority change, stdin
 * from /dev/null, stdout and stderr to TMP/server.log (shown when a start
 * fails), and SIGTERM as the parent-death signal, so that a harness killed
 * halfway leaves no server behind. Waits are bounded (10 s to start, 5 s to
 * stop, then SIGKILL). bench_server_stop() sends SIGTERM, reaps the process
 * and removes its folder.
 *
 * Interface:
 *   bench_server_t                 one running server
 *   bench_server_start()           BENCH_SERVER_ORDOD or BENCH_SERVER_REDIS
 *   bench_server_start_ordod()     ordod on a given port, with further flags
 *   bench_free_port()              a port of 127.0.0.1 free a moment ago
 *   bench_server_stop()            SIGTERM, wait, remove the folder
 *   bench_server_connect()         a blocking hiredis connection to it
 *   bench_server_cpu()             its CPU seconds so far (all threads)
 *   bench_server_info()            one numeric field of its INFO
 */
#include "servers.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define SERVER_START_S 10.0 /* bound on a start */
#define SERVER_STOP_S 5.0   /* bound on SIGTERM before SIGKILL */
#define SERVER_PORT_TRIES 3 /* redis: fresh ports when one was taken */

static const char *server_name(bench_server_kind kind) {
  return kind == BENCH_SERVER_ORDOD ? "ordod" : "redis-server";
}

/* The ordod binary: $ORDO_BENCH_ORDOD, the build's (from CMake), or the
 * ordod beside the folder of this program. 0, or -1. */
static int server_ordod_path(char *buf, size_t n) {
#ifdef ORDO_BENCH_ORDOD
  const char *built = ORDO_BENCH_ORDOD;
#else
  const char *built = NULL;
#endif
  return bench_program_path(buf, n, "ORDO_BENCH_ORDOD", built, "ordod");
}

/* A port that was free a moment ago: bind port 0, read it, close. */
static int server_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  int port = -1;
  if (fd < 0)
    return -1;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

/* Prints the last lines of the server's log on stderr. */
static void server_show_log(const bench_server_t *s) {
  char path[PATH_MAX], buf[2048];
  snprintf(path, sizeof path, "%s/server.log", s->dir);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return;
  if (fseek(f, 0, SEEK_END) == 0) {
    long end = ftell(f);
    fseek(f, end > (long)sizeof buf - 1 ? end - (long)sizeof buf + 1 : 0,
          SEEK_SET);
  }
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  if (n > 0)
    fprintf(stderr, "--- %s log (%s) ---\n%s%s---\n", server_name(s->kind),
            path, buf, buf[n - 1] == '\n' ? "" : "\n");
}

/* fork + exec of argv (argv[0] looked up in PATH), output to the log. */
static int server_spawn(const bench_row_t *row, bench_server_t *s,
                        char *const argv[]) {
  char log[PATH_MAX];
  snprintf(log, sizeof log, "%s/server.log", s->dir);
  int out = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (out < 0 || in < 0) {
    bench_error(row, "%s: cannot open %s or /dev/null: %s",
                server_name(s->kind), log, strerror(errno));
    if (out >= 0)
      close(out);
    if (in >= 0)
      close(in);
    return -1;
  }
  fflush(NULL);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    bench_error(row, "fork: %s", strerror(errno));
    close(out);
    close(in);
    return -1;
  }
  if (pid == 0) {
    /* The child: async-signal-safe calls only. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
      _exit(126);
    if (dup2(in, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 ||
        dup2(out, STDERR_FILENO) < 0)
      _exit(126);
    execvp(argv[0], argv);
    static const char msg[] = "exec failed: not found or not executable\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(127);
  }
  close(out);
  close(in);
  s->pid = pid;
  return 0;
}

/* 1 if the server has exited (and is reaped), 0 if it runs. */
static int server_exited(bench_server_t *s, int *status) {
  pid_t r = waitpid(s->pid, status, WNOHANG);
  if (r == s->pid) {
    s->pid = 0;
    return 1;
  }
  return 0;
}

/* The port from the "ready port=N" line of ordod's log, or 0. */
static int server_ready_port(const bench_server_t *s) {
  char path[PATH_MAX], buf[4096];
  snprintf(path, sizeof path, "%s/server.log", s->dir);
  FILE *f = fopen(path, "r");
  int port = 0;
  if (f == NULL)
    return 0;
  while (fgets(buf, sizeof buf, f) != NULL)
    if (strncmp(buf, "ready port=", 11) == 0 && strchr(buf, '\n') != NULL) {
      port = atoi(buf + 11);
      break;
    }
  fclose(f);
  return port;
}

/* 1 if the server answers PING with PONG. */
static int server_pings(const bench_server_t *s) {
  redisContext *c = bench_server_connect(s, 0.2);
  int ok = 0;
  if (c == NULL)
    return 0;
  redisReply *r = redisCommand(c, "PING");
  ok =
      r != NULL && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
  if (r != NULL)
    freeReplyObject(r);
  redisFree(c);
  return ok;
}

long long bench_server_info(redisContext *c, const char *section,
                            const char *field) {
  redisReply *r =
      section ? redisCommand(c, "INFO %s", section) : redisCommand(c, "INFO");
  long long v = -1;
  if (r != NULL && r->type == REDIS_REPLY_STRING) {
    size_t fl = strlen(field);
    for (const char *p = r->str; (p = strstr(p, field)) != NULL; p += fl)
      if ((p == r->str || p[-1] == '\n') && p[fl] == ':') {
        v = atoll(p + fl + 1);
        break;
      }
  }
  if (r != NULL)
    freeReplyObject(r);
  return v;
}

static void server_rm_dir(bench_server_t *s) {
  bench_rm_tree(s->dir);
  s->dir[0] = '\0';
}

/* Waits until the started server is ready (s->port set): 0, or -1 after
 * reporting; *retry set when redis died because its port was taken. */
static int server_wait_ready(const bench_row_t *row, bench_server_t *s,
                             int *retry) {
  double deadline = bench_now() + SERVER_START_S;
  int status = 0;
  *retry = 0;
  while (bench_now() < deadline) {
    if (server_exited(s, &status)) {
      if (s->kind == BENCH_SERVER_REDIS && WIFEXITED(status) &&
          WEXITSTATUS(status) != 127) {
        *retry = 1; /* most likely the port: try another */
        return -1;
      }
      bench_error(row, "%s exited before it was ready (%s %d)%s",
                  server_name(s->kind), WIFEXITED(status) ? "status" : "signal",
                  WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                  WIFEXITED(status) && WEXITSTATUS(status) == 127
                      ? "; is it installed? (scripts/bootstrap.sh)"
                      : "");
      server_show_log(s);
      return -1;
    }
    if (s->kind == BENCH_SERVER_ORDOD && s->port == 0)
      s->port = server_ready_port(s);
    if (s->port > 0 && server_pings(s))
      return 0;
    bench_sleep(0.01);
  }
  bench_error(row, "%s was not ready within %.0f s", server_name(s->kind),
              SERVER_START_S);
  server_show_log(s);
  return -1;
}

/* The most further arguments bench_server_start_ordod() passes on. */
#define SERVER_MAX_EXTRA 16

static int server_start(const bench_row_t *row, bench_server_kind kind,
                        bench_server_t *s, int ordod_port,
                        const char *const extra[]);

int bench_server_start(const bench_row_t *row, bench_server_kind kind,
                       bench_server_t *s) {
  return server_start(row, kind, s, 0, NULL);
}

int bench_server_start_ordod(const bench_row_t *row, bench_server_t *s,
                             int port, const char *const extra[]) {
  return server_start(row, BENCH_SERVER_ORDOD, s, port, extra);
}

int bench_server_start_redis(const bench_row_t *row, bench_server_t *s,
                             const char *const extra[]) {
  return server_start(row, BENCH_SERVER_REDIS, s, 0, extra);
}

int bench_free_port(void) {
  return server_free_port();
}

static int server_start(const bench_row_t *row, bench_server_kind kind,
                        bench_server_t *s, int ordod_port,
                        const char *const extra[]) {
  const char *tmp = getenv("TMPDIR");
  char bin[PATH_MAX], port[16];
  memset(s, 0, sizeof *s);
  s->kind = kind;
  if (kind == BENCH_SERVER_ORDOD && server_ordod_path(bin, sizeof bin) != 0) {
    bench_error(row, "ordod not found (looked at $ORDO_BENCH_ORDOD, the "
                     "build's ordod, and ../ordod next to ordo_bench); build "
                     "the 'ordod' target");
    return -1;
  }
  for (int attempt = 0; attempt < SERVER_PORT_TRIES; attempt++) {
    snprintf(s->dir, sizeof s->dir, "%s/ordo_bench.XXXXXX",
             tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
    if (mkdtemp(s->dir) == NULL) {
      bench_error(row, "mkdtemp %s: %s", s->dir, strerror(errno));
      s->dir[0] = '\0';
      return -1;
    }
    if (kind == BENCH_SERVER_ORDOD) {
      char *argv[8 + SERVER_MAX_EXTRA] = {bin,    "--port",    port, "--dir",
                                          s->dir, "--verbose", "0",  NULL};
      size_t n = 7;
      snprintf(port, sizeof port, "%d", ordod_port);
      size_t i = 0;
      for (; extra != NULL && extra[i] != NULL && i < SERVER_MAX_EXTRA; i++)
        argv[n++] = (char *)extra[i];
      argv[n] = NULL;
      if (extra != NULL && extra[i] != NULL) {
        bench_error(row, "ordod: more than %d further arguments",
                    SERVER_MAX_EXTRA);
        break;
      }
      /* A port given is the one to use; 0: ordod prints the one it got. */
      s->port = 0;
      if (server_spawn(row, s, argv) != 0)
        break;
    } else {
      s->port = server_free_port();
      /* A Cluster node (extra arguments) also listens on its port + 10000,
       * which must be a port: redis-server refuses one above 55535. */
      for (int k = 0; extra != NULL && s->port > 55535 && k < 100; k++)
        s->port = server_free_port();
      if (s->port <= 0 || (extra != NULL && s->port > 55535)) {
        bench_error(row, "no free port: %s", strerror(errno));
        break;
      }
      snprintf(port, sizeof port, "%d", s->port);
      char *argv[14 + SERVER_MAX_EXTRA] = {
          "redis-server", "--port", port,        "--save", "",
          "--appendonly", "no",     "--dir",     s->dir,   "--daemonize",
          "no",           "--bind", "127.0.0.1", NULL};
      size_t i = 0;
      for (; extra != NULL && extra[i] != NULL && i < SERVER_MAX_EXTRA; i++)
        argv[13 + i] = (char *)extra[i];
      argv[13 + i] = NULL;
      if (server_spawn(row, s, argv) != 0)
        break;
    }
    int retry = 0;
    if (server_wait_ready(row, s, &retry) == 0)
      return 0;
    if (!retry)
      break;
    if (attempt + 1 == SERVER_PORT_TRIES) {
      bench_error(row, "redis-server exited before it was ready, %d times",
                  SERVER_PORT_TRIES);
      server_show_log(s);
      break;
    }
    server_rm_dir(s);
  }
  bench_server_stop(row, s);
  return -1;
}

void bench_server_stop(const bench_row_t *row, bench_server_t *s) {
  int status = 0;
  if (s->pid > 0) {
    kill(s->pid, SIGTERM);
    double deadline = bench_now() + SERVER_STOP_S;
    while (!server_exited(s, &status) && bench_now() < deadline)
      bench_sleep(0.005);
    if (s->pid > 0) {
      bench_error(row, "%s did not stop within %.0f s of SIGTERM; SIGKILL",
                  server_name(s->kind), SERVER_STOP_S);
      kill(s->pid, SIGKILL);
      waitpid(s->pid, &status, 0);
      s->pid = 0;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      bench_error(row, "warning: %s ended with %s %d", server_name(s->kind),
                  WIFEXITED(status) ? "status" : "signal",
                  WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      server_show_log(s);
    }
  }
  server_rm_dir(s);
  s->port = 0;
}

redisContext *bench_server_connect(const bench_server_t *s, double timeout) {
  struct timeval tv = {
      (time_t)timeout,
      (suseconds_t)((timeout - (double)(time_t)timeout) * 1e6)};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", s->port, tv);
  if (c == NULL)
    return NULL;
  if (c->err != 0 || redisSetTimeout(c, tv) != REDIS_OK) {
    redisFree(c);
    return NULL;
  }
  return c;
}

double bench_server_cpu(const bench_server_t *s) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)s->pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  /* After the command name's ')': field 3 (state) onwards; utime and stime
   * are fields 14 and 15, in clock ticks. */
  char *p = strrchr(buf, ')');
  unsigned long long ut = 0, st = 0;
  if (p == NULL || sscanf(p + 2,
                          "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                          "%llu %llu",
                          &ut, &st) != 2)
    return -1;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}
