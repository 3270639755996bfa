/*
 * conn.h — everything that touches hiredis directly: the URL, connecting
 * with a bound on every step, telling "nothing answers" from "something that
 * is not Redis answers", one script call with its NOSCRIPT fallback, and
 * decoding what comes back (answers and published messages) without
 * trusting its shape.
 *
 * Only the RESP2 calls that hiredis 0.14 and 1.x share are used, on
 * non-blocking sockets: hiredis formats commands and parses replies, and
 * every wait for the socket is ours. Each exchange takes a deadline on the
 * monotonic clock, computed once when the call starts, and each wait uses
 * the time left, so a call that writes, reads a reply in many pieces and
 * resends after NOSCRIPT still ends by its deadline. (Socket timeouts, the
 * alternative, bound each read() alone, rounded up to the kernel's tick:
 * a call of several reads could take several timeouts.)
 *
 * hiredis 0.14's reader trusts the lengths a reply announces: "*1170000000"
 * makes it allocate 9 GB for the element pointers, "$2000000000" makes it
 * buffer 2 GB waiting for the string. So every reader is bounded: our
 * object functions refuse an array, a nesting or a string beyond what the
 * script and the listing can produce (below), and the reply as a whole
 * beyond a memory budget, before hiredis allocates; and the bytes not yet
 * parsed are checked after every read, so an announced string over the
 * limit is refused from its header, before its bytes are waited for, and
 * a string that does not end (CRLF) where its header says is refused
 * rather than cut or run into the next reply. A refused reply is
 * malformed; the stream behind it cannot be trusted, so its connection is
 * dropped.
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

/* ---- bounds on what a reply may hold ----------------------------------------
 *
 * What Redis legitimately sends the adapter, and the limit for each:
 *   - arrays: a script answer has 18 integers (2 for a lease or a rate
 *     limiter, 3 for a concurrency limit), a message and SUBSCRIBE's confirmation 3 elements, a SCAN
 *     page 2, its keys about COUNT (200; Redis may return a few more): at
 *     most 4096 elements;
 *   - nesting: only a SCAN page holds an array in an array: 2 levels;
 *   - strings: the longest is a key SCAN returns, PREFIX (< 64) "breaker:"
 *     NAME (< 256), or a message, under 300 bytes; stray keys under the
 *     prefix are skipped when listing, up to 64 KiB (beyond, the page is
 *     malformed);
 *   - a reply in memory: 4 MiB, above a page of 4096 of the longest keys
 *     (about 1.6 MiB with hiredis' objects);
 *   - bytes buffered but not parsed: a string's worth plus a read or two.
 */
#define FLEET_REPLY_ELEMENTS_MAX 4096
#define FLEET_REPLY_DEPTH_MAX 2
#define FLEET_REPLY_STRING_MAX (64 * 1024)
#define FLEET_REPLY_MEMORY_MAX (4 * 1024 * 1024)
#define FLEET_READ_BUFFER_MAX (FLEET_REPLY_STRING_MAX + 32 * 1024)

/* Install the bounded object functions on a reader (before it reads). 0,
 * RESIL_ENOMEM, RESIL_EINVAL for a reader without object functions. The bounds live until resil__fleet_reader_free, or
 * resil__fleet_close for a context's reader. */
int resil__fleet_reader_bound(redisReader *rd);
void resil__fleet_reader_free(redisReader *rd);
/* The next reply from what a bounded reader holds: 1 with *reply (free it
 * with freeReplyObject), 0 when more bytes are needed, -1 when the bytes
 * are malformed or beyond the bounds (why says which; the reader is then
 * unusable). */
int resil__fleet_reader_next(redisReader *rd, void **reply, char *why, size_t cap);

/* ---- exchanges with a deadline ------------------------------------------------ */

/* The monotonic instant `timeout` from now: the deadline of one call. */
int64_t resil__fleet_deadline(resil_duration timeout);

/* Connect, AUTH and SELECT when the URL asks, and PING, all by one
 * deadline `timeout` from now (name resolution aside: the system resolver
 * bounds it). NULL on failure, with *fail and a sentence in why. */
redisContext *resil__fleet_connect(const fleet_url *u, resil_duration timeout,
                                   fleet_conn_fail *fail, char *why, size_t cap);
/* Free a context made by resil__fleet_connect. NULL-tolerant. */
void resil__fleet_close(redisContext *c);

/* Send one command (len NULL: strlen of each) and read its answer. */
redisReply *resil__fleet_command(redisContext *c, int argc, const char **argv,
                                 const size_t *len, int64_t deadline);
/* Write what is queued (redisAppendCommandArgv) and read the next answer.
 * NULL with c->err set when the deadline passed, the connection failed or
 * the answer was malformed (resil__fleet_malformed); drop the context. */
redisReply *resil__fleet_read(redisContext *c, int64_t deadline);
/* Did the context fail on a malformed answer (rather than I/O)? */
bool resil__fleet_malformed(const redisContext *c);

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

/* The breaker name in a key SCAN returned, `skip` bytes of prefix and
 * "breaker:" in, or NULL when the key holds no name a breaker could have
 * (a stray key someone set by hand). */
const char *resil__fleet_key_name(const redisReply *key, size_t skip);

/*
 * Run one command on `ctx` by `deadline`: EVALSHA, and EVAL when Redis
 * answers NOSCRIPT (*noscript counts it), both within the one deadline. 0;
 * RESIL_EBACKEND when the connection failed, the deadline passed or Redis
 * cannot serve (why says how; drop the context); RESIL_EIO for an error
 * or malformed answer (when ctx->err is set too, the answer broke the
 * stream: drop the context). *sent counts the commands written.
 */
int resil__fleet_run(redisContext *ctx, const fleet_cmd *c, const fleet_config *cfg,
                     const char *sha, int64_t deadline, fleet_state *out,
                     uint64_t *noscript, uint64_t *sent, char *why, size_t cap);

/* SCRIPT LOAD into sha[41], within `timeout`. 0, RESIL_EBACKEND (no
 * answer, a malformed one, or Redis cannot serve: why), RESIL_EIO. */
int resil__fleet_load_script(redisContext *ctx, char sha[41], resil_duration timeout,
                             char *why, size_t cap);

#endif
