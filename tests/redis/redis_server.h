/*
 * redis_server.h — a real redis-server for the Redis adapter's tests and
 * benchmark, and a fake server that answers like something else.
 *
 * The fleet's claims are about what Redis really does (scripts run
 * atomically, a killed server loses its keys, SCRIPT FLUSH forgets the
 * script), so the tests run against the real thing: each test program
 * starts its own server on a free loopback port, with no persistence and no
 * files of its own, and can kill, pause and restart it to stage outages. Every server is stopped at exit, even when a test
 * fails, and dies with the process that started it if that is killed.
 *
 * Failing to start a server is a test failure, never a skip: the suite must
 * run wherever it is claimed to pass.
 */
#ifndef RESIL_TEST_REDIS_SERVER_H
#define RESIL_TEST_REDIS_SERVER_H

#include <hiredis/hiredis.h>

typedef struct redis_server redis_server;

/* Start redis-server and wait until it answers. NULL on failure, with
 * the reason on stderr. */
redis_server *redis_server_start(void);
/* Stop it (SIGTERM, then wait). */
void redis_server_stop(redis_server *s);

int redis_server_port(const redis_server *s);
/* "redis://127.0.0.1:PORT" */
const char *redis_server_url(const redis_server *s);
/* The server's pid, while running. */
int redis_server_pid(const redis_server *s);

/* An outage: SIGKILL and reap it. Its keys and scripts are gone. */
void redis_server_kill(redis_server *s);
/* Start it again on the same port, empty. 0, or -1 (reason on stderr). */
int redis_server_restart(redis_server *s);
/* A server that accepts but never answers (SIGSTOP), and back (SIGCONT). */
void redis_server_pause(redis_server *s);
void redis_server_resume(redis_server *s);

/* Run one command on a fresh connection; NULL if it could not be sent.
 * Free the reply with freeReplyObject(). */
redisReply *redis_server_command(redis_server *s, int argc, const char **argv);
/* The integer a command answers with, or -1. */
long long redis_server_integer(redis_server *s, int argc, const char **argv);
/* Calls of `command` since the server started ("evalsha", "eval", ...),
 * from INFO commandstats. */
long long redis_server_calls(redis_server *s, const char *command);

/* A TCP server on 127.0.0.1 that answers every connection with `reply`
 * (copied) and closes it: something that is not Redis. */
typedef struct fake_server fake_server;
fake_server *fake_server_start(const char *reply);
int fake_server_port(const fake_server *f);
/* "redis://127.0.0.1:PORT" */
const char *fake_server_url(const fake_server *f);
void fake_server_stop(fake_server *f);

/* One scripted answer: what a fake server that speaks RESP writes back
 * when a command of that name arrives, and how. */
typedef struct fake_answer {
    const char *command; /* "PING", "EVALSHA", ... any case; NULL ends a list */
    const char *reply;   /* RESP text written back; "": nothing, the connection
                            stays open; NULL: close the connection */
    int delay_ms;        /* wait this long first */
    int trickle_ms;      /* > 0: write one byte at a time, this far apart */
    const char *then;    /* optional: written `then_ms` after the reply, as a
                            server pushes a message on a subscription;
                            fake_hang_up: the connection closed then */
    int then_ms;
} fake_answer;

/* A `then` that closes the connection: a server gone mid-answer. */
extern const char fake_hang_up[];

/* A TCP server on 127.0.0.1 that reads commands on every connection and
 * answers each with the first of `answers` (kept, not copied: it must
 * outlive the server) whose command matches; "-ERR unknown command" for the
 * rest. Redis as it must never answer, on demand. */
fake_server *fake_server_answering(const fake_answer *answers);

#endif
