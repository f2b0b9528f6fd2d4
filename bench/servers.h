/*
 * servers.h -- the servers that server rows start and stop (servers.c):
 * ordod, ordo's lock server, and redis-server, each on a free port of
 * 127.0.0.1 in a temporary folder of its own. See README.md.
 */
#ifndef ORDO_BENCH_SERVERS_H
#define ORDO_BENCH_SERVERS_H

#include "bench.h"

#include <hiredis/hiredis.h>
#include <sys/types.h>

typedef enum bench_server_kind_e {
  BENCH_SERVER_ORDOD,
  BENCH_SERVER_REDIS,
} bench_server_kind;

/* One running server. */
typedef struct bench_server_s {
  bench_server_kind kind;
  pid_t pid;     /* 0 when not running */
  int port;      /* on 127.0.0.1 */
  char dir[512]; /* its temporary folder, removed by bench_server_stop() */
} bench_server_t;

/* Starts a server and waits (at most 10 s) until it answers PING. 0, or -1
 * after reporting with bench_error() (and showing the server's log); on
 * failure nothing is left running. */
int bench_server_start(const bench_row_t *row, bench_server_kind kind,
                       bench_server_t *s);
/* The same for ordod on `port` (0: any; ordod says which) with further
 * arguments (NULL-terminated, or NULL), such as --peers for shards that
 * must know each other's ports before they start. */
int bench_server_start_ordod(const bench_row_t *row, bench_server_t *s,
                             int port, const char *const extra[]);
/* The same for redis-server with further arguments (NULL-terminated, at
 * most 16), such as --cluster-enabled yes; with any, its port is at most
 * 55535 (a Cluster node's bus is its port + 10000). */
int bench_server_start_redis(const bench_row_t *row, bench_server_t *s,
                             const char *const extra[]);
/* A port of 127.0.0.1 that was free a moment ago (bound to port 0 and
 * closed again), or -1. */
int bench_free_port(void);
/* SIGTERM, a bounded wait (then SIGKILL), and the folder removed. Safe on a
 * server that is not running. */
void bench_server_stop(const bench_row_t *row, bench_server_t *s);
/* A blocking connection with `timeout` seconds for connect and replies, or
 * NULL. */
redisContext *bench_server_connect(const bench_server_t *s, double timeout);
/* The numeric field `field` of the server's INFO (of that section, or of
 * all when section is NULL), or -1. */
long long bench_server_info(redisContext *c, const char *section,
                            const char *field);
/* The server's CPU time so far in seconds (user + system, all threads), or
 * -1. */
double bench_server_cpu(const bench_server_t *s);

#endif /* ORDO_BENCH_SERVERS_H */
