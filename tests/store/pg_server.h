/*
 * pg_server.h — a throwaway PostgreSQL server for tests and benchmarks.
 *
 * The store's PostgreSQL backend is tested against a real server, started
 * here in a temporary directory and gone afterwards. initdb refuses to run
 * as root and CI runs as root, so under root the server runs as the
 * unprivileged `postgres` system user (created when missing); otherwise as
 * the current user. It listens on 127.0.0.1 on a free port and on a unix
 * socket in its directory. A watchdog process stops it and removes the
 * directory when the test process ends without doing so (a crash, a kill).
 */
#ifndef RESIL_TEST_PG_SERVER_H
#define RESIL_TEST_PG_SERVER_H

typedef struct pg_server pg_server;

/* Start a server; NULL on failure, with the reason on stderr. */
pg_server *pg_server_start(void);
/* The same with fsync on, for benchmarks that should measure a durable
 * server (the tests turn fsync off for speed). */
pg_server *pg_server_start_durable(int durable);
/* "postgres://postgres@127.0.0.1:PORT/postgres". */
const char *pg_server_url(const pg_server *s);
int pg_server_port(const pg_server *s);
/* Stop the server but keep its data (an outage), then start it again on
 * the same port, so URLs taken before stay valid. 0 on success. */
int pg_server_pause(pg_server *s);
int pg_server_resume(pg_server *s);
/* Stop the server and remove its directory. NULL is ignored. */
void pg_server_stop(pg_server *s);

#endif
