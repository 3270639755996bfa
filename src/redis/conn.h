/*
 * conn.h — everything that touches hiredis directly: the URL, connecting
 * with a bound on every step, telling "nothing answers" from "something that
 * is not Redis answers", one script call with its NOSCRIPT fallback, and
 * decoding what comes back (answers and published messages) without
 * trusting its shape.
 *
 * Only the blocking RESP2 calls that hiredis 0.14 and 1.x share are used;
 * the bound on each comes from the socket timeouts redisSetTimeout sets, so
 * no call here can wait longer than the configured timeout per reply.
 */
#ifndef RESIL_REDIS_CONN_H
#define RESIL_REDIS_CONN_H

#include <hiredis/hiredis.h>

#include "fleet.h"

typedef struct fleet_url {
    char host[256];
    int port;
    char user[128];
    char password[256];
    int db;
} fleet_url;

/* redis://[[user]:password@]host[:port][/db]; "[::1]" for IPv6 hosts.
 * RESIL_EINVAL naming redis.url. */
int resil__fleet_url_parse(const char *url, fleet_url *out, resil_err *err);

/* Why a connection attempt failed. */
typedef enum fleet_conn_fail {
    FLEET_UNREACHABLE = 1, /* refused, or no answer within the timeout */
    FLEET_NOT_REDIS,       /* something answered, but not as Redis does */
    FLEET_REFUSED          /* Redis answered with an error (AUTH, SELECT) */
} fleet_conn_fail;

/* Connect, set the timeouts, AUTH and SELECT when the URL asks, and PING.
 * NULL on failure, with *fail and a sentence in why. */
redisContext *resil__fleet_connect(const fleet_url *u, resil_duration timeout,
                                   fleet_conn_fail *fail, char *why, size_t cap);

/* A sentence for a context's I/O failure ("timeout after 50ms", "connection
 * lost: ..."), naming the command. */
void resil__fleet_io_why(const redisContext *c, const char *command,
                         resil_duration timeout, char *why, size_t cap);

/* The argument vector of one script call. */
#define FLEET_ARGV_MAX 32
typedef struct fleet_argv {
    int argc;
    const char *argv[FLEET_ARGV_MAX];
    size_t len[FLEET_ARGV_MAX];
    char num[FLEET_ARGV_MAX][32];
} fleet_argv;

/* EVALSHA `sha`, or EVAL of the script text when sha is NULL. */
void resil__fleet_argv(fleet_argv *a, const fleet_cmd *c, const fleet_config *cfg,
                       const char *sha);
/* Decode a script's answer: 0, or RESIL_EIO for an error or malformed one
 * (another shape, or a number outside what the script can produce). */
int resil__fleet_decode(const fleet_cmd *c, const redisReply *r, fleet_state *out);
/* Decode a message from the subscription, "STATE EPOCH UNTIL REASON NAME":
 * false for anything else (a subscribe confirmation, a stranger's PUBLISH). */
bool resil__fleet_parse_message(const redisReply *m, fleet_state *s, const char **name);
bool resil__fleet_noscript(const redisReply *r);
/* An error reply that says the server cannot serve us at all for now (a
 * replica after a failover, memory full, a dataset loading, a script
 * stuck, our rights revoked, a cluster node for another slot), as opposed
 * to one command's trouble: the client treats it as Redis being down. */
bool resil__fleet_unavailable(const redisReply *r);

/*
 * Run one command on `ctx`: EVALSHA, and EVAL when Redis answers NOSCRIPT
 * (*noscript counts it). 0; RESIL_EBACKEND when the connection failed or
 * Redis cannot serve (why says how; drop the context); RESIL_EIO for an
 * error or malformed answer. *sent counts the commands written.
 */
int resil__fleet_run(redisContext *ctx, const fleet_cmd *c, const fleet_config *cfg,
                     const char *sha, fleet_state *out, uint64_t *noscript,
                     uint64_t *sent, char *why, size_t cap);

/* SCRIPT LOAD into sha[41]. 0, RESIL_EBACKEND (no answer, or Redis cannot
 * serve: why), RESIL_EIO. */
int resil__fleet_load_script(redisContext *ctx, char sha[41], resil_duration timeout,
                             char *why, size_t cap);

#endif
