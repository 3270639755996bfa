/*
 * store.h — libresil-store: the server's half of idempotency.
 *
 * A retry is only safe for a POST when the server recognises the repeat. The
 * store keeps one record per (tenant, operation, key): the request's hash, a
 * status that is NULL while the first request is still running, the saved
 * response, when it was created and until when its processing lease runs.
 * resil_store_begin() answers exactly one of four things:
 *
 *   first        you own the key: run the operation, then complete() with
 *                its response, or release() it if the operation failed;
 *   replay       it already ran: here is the saved response, byte for byte;
 *   in progress  another worker holds the lease (HTTP: 409 + Retry-After);
 *   mismatch     the key was used with a different request (HTTP: 422).
 *
 * The first writer wins by the database's unique constraint (INSERT … ON
 * CONFLICT DO NOTHING), never by check-then-insert, so two processes, or
 * two machines, racing on one key get one "first" between them. A worker
 * that dies keeps the key only until its lease expires; the next request
 * then takes the record over with a conditional UPDATE, and the lease number
 * it gets back fences the dead worker out (its late complete() is refused).
 *
 * Two backends behind one interface, chosen by URL: "sqlite:PATH" (the
 * embedded default: WAL, one file, safe across processes on one machine)
 * and "postgres://…" / "postgresql://…" (libpq, for a fleet). Each call is
 * one database transaction run under a resil retry policy: on a transient
 * error (SQLITE_BUSY/LOCKED; SQLSTATE 40001, 40P01, 08xxx, 57P0x) the whole
 * transaction is rolled back and run again — the "execution strategy"
 * pattern — never a part of it. The classifiers are public so applications
 * can apply the same rule to their own transactions.
 *
 * Two additions keep the promise when the database does not: a journal
 * (opts.journal) keeps completions the database cannot take on local disk
 * until it can, and the transactional form (resil_store_begin_in /
 * resil_store_complete_in) lets an application claim and complete the key
 * inside its own transaction, so the key commits with the business write.
 * For an event loop, the asynchronous form (resil_store_begin_async and
 * the others) queues a key write into the same group commit and answers
 * through a callback once it is durable, with no thread per request.
 *
 * Link with -lresil-store (pkg-config resil-store). This header is not part
 * of resil.h: programs that do not use it never see SQLite or libpq.
 */
#ifndef RESIL_STORE_H
#define RESIL_STORE_H

#include "retry.h"

RESIL_BEGIN_DECLS

/* ---- SHA-256 and the request hash --------------------------------------- */

#define RESIL_SHA256_LEN 32

/* Incremental SHA-256 (FIPS 180-4). Fields are private. */
typedef struct resil_sha256_ctx {
    uint32_t h[8];
    uint64_t total;    /* bytes hashed so far */
    uint8_t block[64];
    size_t used;       /* bytes waiting in block */
    resil_reserved reserved_[2]; /* room to grow (docs/abi.md) */
} resil_sha256_ctx;

RESIL_API void resil_sha256_init(resil_sha256_ctx *c);
RESIL_API void resil_sha256_update(resil_sha256_ctx *c, const void *data, size_t len);
RESIL_API void resil_sha256_final(resil_sha256_ctx *c, uint8_t out[RESIL_SHA256_LEN]);
RESIL_API void resil_sha256(const void *data, size_t len, uint8_t out[RESIL_SHA256_LEN]);

/*
 * The request hash the gateway uses: SHA-256 over method, target (path and
 * query) and body, each preceded by its length as 8 big-endian bytes, so
 * that ("ab", "c") and ("a", "bc") differ. NULL strings hash as empty; body
 * may be NULL when body_len is 0. Callers that identify requests otherwise
 * (a canonical JSON form, say) pass their own 32 bytes to begin().
 */
RESIL_API void resil_store_request_hash(const char *method, const char *target,
                                        const void *body, size_t body_len,
                                        uint8_t out[RESIL_SHA256_LEN]);

/* ---- transient-error classifiers ------------------------------------------ */

/* True for SQLITE_BUSY and SQLITE_LOCKED, primary or extended codes: what
 * the store runs again at once. (SQLITE_FULL and SQLITE_IOERR are not: the
 * store reports them as RESIL_EBUSY without spending its retries, see the
 * error classes below.) */
RESIL_API bool resil_store_sqlite_transient(int sqlite_rc);
/* True for 40001 (serialization failure), 40P01 (deadlock), class 08
 * (connection exception), 57P01/57P02/57P03 (the server is shutting down,
 * restarting after a crash, or not yet accepting connections) and 53300
 * (too many connections). NULL is false. */
RESIL_API bool resil_store_pg_transient(const char *sqlstate);

/* ---- the store ------------------------------------------------------------ */

typedef struct resil_store resil_store;

#define RESIL_STORE_FIELD_MAX 255 /* bytes in a tenant, operation or key */

typedef struct resil_store_opts {
    const char *url;          /* required: "sqlite:PATH" or "postgres://…" */
    const char *table;        /* default "resil_idempotency"; [A-Za-z_][A-Za-z0-9_]*, <= 63 */
    resil_duration lease;     /* how long "first" owns the key; default 60 s; > 0 */
    resil_duration retention; /* purge() deletes older records; default 24 h; >= lease */
    uint32_t connections;     /* pool size, opened on demand; default 4; 1..64
                                 ("sqlite::memory:" always uses 1) */
    resil_duration busy_timeout; /* SQLite waits this long for a lock before
                                    reporting BUSY; default 100 ms; 0..60 s */
    resil_retry_policy retry; /* the execution strategy; default 8 attempts,
                                 exponential from 5 ms, full jitter, 250 ms cap */
    resil_clock *clock;       /* wall time for created_at and leases; NULL = system */
    const char *journal;      /* NULL (default): none. A file path: completions
                                 the database cannot take are appended here,
                                 fsync'ed, and replayed into the database when
                                 it returns (see resil_store_complete()). One
                                 process at a time: a second store opening the
                                 same journal gets RESIL_EBUSY. */
    /* Group commit (see "Batching" in docs/idempotency.md): the key writes
     * of concurrent calls (begin's claim, complete, release, renew) share
     * one transaction and one sync. A batch holds at most batch_max calls
     * (default 64; 0 or 1: every call its own transaction, as before;
     * at most 1024) and its first call waits at most batch_window for
     * others (default 0: no waiting, a batch is whatever queued while the
     * previous one ran; at most 1 s; > 0 needs batch_max >= 2). Each call
     * still returns its own result, only once its batch is durable. */
    union { resil_duration batch_window; resil_reserved r_batch_window_; };
    union { uint32_t batch_max; resil_reserved r_batch_max_; };
    /* SQLite only: how hard a commit syncs (RESIL_STORE_SYNC_FULL, the
     * default, or RESIL_STORE_SYNC_NORMAL; see resil_store_sync). */
    union { int sqlite_sync; resil_reserved r_sqlite_sync_; };
    /* Completed records kept in memory, at most this many bytes of keys,
     * responses and 192 per entry for its bookkeeping (least recently
     * used evicted first): a replay or a mismatch of a completed key is
     * answered without the database ("The replay cache" in
     * docs/idempotency.md). Default 16 MiB; 0: off. The fleet must purge
     * with this store's retention, or a longer one, on clocks not ahead
     * of this store's. */
    union { size_t cache_bytes; resil_reserved r_cache_bytes_; };
} resil_store_opts;

/* What a committed SQLite transaction survives.
 *   FULL    (default) every commit is synced to disk before it returns:
 *           durable across a process crash and a power loss or OS crash.
 *   NORMAL  commits are written to the WAL file but synced only at a
 *           checkpoint: durable across a process crash (the OS has the
 *           bytes), but a power loss or OS crash may lose the transactions
 *           committed since the last checkpoint. The file is never
 *           corrupted. For the store that means: keys claimed and answers
 *           saved in the last moments before a power cut may be forgotten,
 *           so a retry may run a request again. */
typedef enum resil_store_sync {
    RESIL_STORE_SYNC_FULL = 0,
    RESIL_STORE_SYNC_NORMAL = 1
} resil_store_sync;

RESIL_API void resil_store_opts_default(resil_store_opts *o);

/*
 * Open a store: check every option (naming the first bad one,
 * "store.lease must be >= 1ms, got 0s"), open and lock the journal when one is
 * configured, connect once, create the table and its index when missing,
 * and replay what a previous process left in the journal. Errors:
 * RESIL_EINVAL (options, unsupported URL, a journal file that is not one),
 * RESIL_EBACKEND / RESIL_EBUSY (the database; on SQLite RESIL_EBACKEND
 * also for a file the store could open only read-only, and for a table of
 * its name without the unique key on (tenant, operation, idempotency_key)
 * the claim rests on), RESIL_EBUSY (the journal is
 * in use by another store), RESIL_EIO (the journal cannot be read or
 * written), RESIL_ENOMEM.
 */
RESIL_API int resil_store_new(const resil_store_opts *o, resil_store **out,
                              resil_err *err);
RESIL_API void resil_store_free(resil_store *s);
/* "sqlite" or "postgres". */
RESIL_API const char *resil_store_backend(const resil_store *s);

/* What a record is keyed by. NULL tenant or operation means "". The key must
 * be non-empty; each field is at most RESIL_STORE_FIELD_MAX bytes, every one
 * printable ASCII (0x20-0x7E), the characters an Idempotency-Key header's
 * structured-field string can carry. Anything else is RESIL_EINVAL. */
typedef struct resil_store_key {
    const char *tenant;
    const char *operation;
    const char *key;
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_store_key;

/* A response to save. headers is an opaque blob (the gateway keeps
 * "Name: value\r\n" lines); either pointer may be NULL when its length is 0.
 * Each is at most 1 GiB (RESIL_ERANGE past it). SQLite holds a value to
 * SQLITE_LIMIT_LENGTH (10^9 bytes unless it was built otherwise): a
 * response past it is RESIL_EBACKEND ("string or blob too big") and the
 * record stays in progress, for a smaller response or a release. */
typedef struct resil_store_response {
    int status;
    const char *headers;
    size_t headers_len;
    const void *body;
    size_t body_len;
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_store_response;

typedef enum resil_store_verdict {
    RESIL_STORE_NONE = 0,
    RESIL_STORE_FIRST,       /* run it; then complete() or release() with `lease` */
    RESIL_STORE_REPLAY,      /* the saved response is in the result */
    RESIL_STORE_IN_PROGRESS, /* someone else holds the lease */
    RESIL_STORE_MISMATCH     /* same key, different request hash */
} resil_store_verdict;

/* "first", "replay", "in progress", "mismatch" ("" for NONE). */
RESIL_API const char *resil_store_verdict_name(resil_store_verdict v);

/*
 * What begin() found. Caller-owned and reusable: the header and body
 * buffers grow when a response does not fit and are kept for the next
 * call, so a long-lived result stops allocating. Initialise with
 * resil_store_result_init(), release with resil_store_result_free().
 */
typedef struct resil_store_result {
    resil_store_verdict verdict;
    uint64_t lease;             /* FIRST: the fencing number for complete/release */
    resil_duration lease_left;  /* IN_PROGRESS: time until the lease expires */
    int64_t created_at;         /* Unix ns, as the store's clock said (ms precision) */
    int status;                 /* REPLAY: the saved status */
    char *headers;              /* REPLAY: the saved blob, NUL-terminated */
    size_t headers_len;
    uint8_t *body;              /* REPLAY: the saved body (NUL-terminated too) */
    size_t body_len;
    /* private */
    size_t headers_cap, body_cap;
    /* FIRST: the key was taken over from a run whose lease expired
     * without an answer; that run may have done the operation */
    union { bool taken_over; resil_reserved r_taken_over_; };
    resil_reserved reserved_[3]; /* room to grow (docs/abi.md) */
} resil_store_result;

RESIL_API void resil_store_result_init(resil_store_result *r);
RESIL_API void resil_store_result_free(resil_store_result *r);

/*
 * Every call's errors fall in three classes, so a server can answer each
 * correctly:
 *   RESIL_EINVAL    the input can never succeed (a bad key): 400, no retry;
 *   RESIL_EBUSY     the database is unreachable, locked or restarting and
 *                   the retry policy ran out, or it cannot write at all for
 *                   now (SQLite: a full disk, an I/O error; PostgreSQL:
 *                   SQLSTATE class 53 or 58, or a statement cancelled by
 *                   its statement_timeout or lock_timeout, 57014 or 55P03),
 *                   which is reported at once without spending the
 *                   retries: 503 with Retry-After;
 *   RESIL_EBACKEND  the database refused for a reason a retry cannot change
 *                   (a data, constraint or schema error; SQLite: a file that
 *                   cannot be opened or is not a database): 500, no retry.
 */

/*
 * Claim the key, or learn what became of it. Returns 0 and sets
 * out->verdict. An in-progress record whose lease has expired is taken over
 * (verdict FIRST with a new lease number) when the hash matches. A key whose
 * completion waits in this store's journal answers IN_PROGRESS until the
 * journal has been replayed into the database.
 */
RESIL_API int resil_store_begin(resil_store *s, const resil_store_key *k,
                                const uint8_t hash[RESIL_SHA256_LEN],
                                resil_store_result *out, resil_err *err);
/* A begin answered from the replay cache alone (store.cache_bytes), on the
 * caller's thread: it never reads nor writes the database and never waits
 * for anything but the cache's lock, so an event loop may call it before
 * resil_store_begin_async() and answer a hit itself, with no thread hop.
 * Returns 0 and sets out->verdict: REPLAY or MISMATCH (filled as
 * resil_store_begin fills it) when the cache holds the key's completed
 * record, else RESIL_STORE_NONE (make the begin: a key the cache does not
 * hold, an in-progress one, one whose completion waits in the journal, or
 * the cache off, or no memory to copy the answer). Errors: RESIL_EINVAL
 * (a bad key, no hash or result). */
RESIL_API int resil_store_begin_cached(resil_store *s, const resil_store_key *k,
                                       const uint8_t hash[RESIL_SHA256_LEN],
                                       resil_store_result *out, resil_err *err);
/* Save the response of the run that owns `lease`. RESIL_ESTATE when that
 * run no longer owns the record (taken over, released, purged, completed).
 * When the database stays unavailable (RESIL_EBUSY) and a journal is
 * configured, the completion is appended to the journal and fsync'ed
 * instead, and 0 is returned: either way the response is durable when this
 * returns 0. */
RESIL_API int resil_store_complete(resil_store *s, const resil_store_key *k,
                                   uint64_t lease, const resil_store_response *r,
                                   resil_err *err);
/* Drop the in-progress record owned by `lease`, so that a retry can run.
 * RESIL_ESTATE when that run no longer owns it. */
RESIL_API int resil_store_release(resil_store *s, const resil_store_key *k,
                                  uint64_t lease, resil_err *err);
/* Extend the lease of the run that owns `lease` to now + opts.lease, while
 * its operation is still running. The lease number does not change (it
 * stays the fencing token). RESIL_ESTATE when that run no longer owns an
 * in-progress record. */
RESIL_API int resil_store_renew(resil_store *s, const resil_store_key *k, uint64_t lease,
                                resil_err *err);

/* Apply every completion waiting in the journal to the database, in order.
 * The store also does this by itself: when it opens (a journal left by a
 * crashed process) and before a call while entries wait. An entry the
 * database refuses as no longer owned (RESIL_ESTATE) is dropped and counted
 * as a conflict. *replayed (may be NULL) says how many were applied. Returns
 * 0 when the journal is empty afterwards (the file is truncated),
 * RESIL_EBUSY when the database is still unavailable (the entries stay).
 * The opportunistic replays before calls run at most once a second, with
 * one attempt per entry; this one runs the store's whole retry policy. */
RESIL_API int resil_store_journal_replay(resil_store *s, size_t *replayed, resil_err *err);

typedef struct resil_store_journal_stats {
    size_t pending;     /* completions waiting for the database */
    uint64_t written;   /* completions ever journaled by this store */
    uint64_t replayed;  /* applied to the database from the journal */
    uint64_t conflicts; /* dropped: the record had moved on (RESIL_ESTATE),
                           or the database refused the entry for good
                           (RESIL_EBACKEND) */
    resil_reserved reserved_[4]; /* room to grow (docs/abi.md) */
} resil_store_journal_stats;

/* All zero when no journal is configured. */
RESIL_API void resil_store_journal_stats_get(resil_store *s, resil_store_journal_stats *out);

/* Group commit, counted since the store opened. */
typedef struct resil_store_batch_stats {
    uint64_t batches; /* transactions that ran batched calls (each attempt once) */
    uint64_t calls;   /* calls those transactions carried */
    uint32_t largest; /* the most calls one batch carried */
    uint32_t queued;  /* calls waiting for a batch right now */
    /* The asynchronous begin's read before any write (docs/idempotency.md):
     * the reads' own batches (one query each where the database allows),
     * the begins they carried, and those a read answered alone (a replay,
     * a mismatch, a live lease), which never entered a write batch. */
    union { uint64_t read_batches; resil_reserved r_read_batches_; };
    union { uint64_t reads; resil_reserved r_reads_; };
    union { uint64_t read_answers; resil_reserved r_read_answers_; };
    /* Begins the replay cache answered (store.cache_bytes), with no read
     * and no write; the asynchronous begins it missed are the reads. */
    union { uint64_t cache_hits; resil_reserved r_cache_hits_; };
} resil_store_batch_stats;

/* All zero but cache_hits when batching is off (batch_max <= 1): the
 * replay cache answers blocking begins either way. */
RESIL_API void resil_store_batch_stats_get(resil_store *s, resil_store_batch_stats *out);

/* ---- the asynchronous form ------------------------------------------------ */

/*
 * begin, complete, release and renew for an event loop, which must not
 * block on a commit: the call checks its arguments, queues the write into
 * the store's group commit and returns at once. When the batch carrying
 * it has committed (durable) or failed, `cb` is invoked with exactly what
 * the blocking call would have returned: rc, and when rc != 0 the error
 * (valid only during the callback); for begin, `out` is filled as the
 * blocking begin fills it. Blocking and asynchronous calls share the same
 * queue and may share a batch.
 *
 * Thread rules:
 *   - the callback runs on a store thread: the one that ran the batch (a
 *     writer thread the store starts on its first asynchronous call, one
 *     per batch that may run at once, or a blocking caller leading a
 *     batch; for a begin answered by its read or by the replay cache,
 *     the reader thread; resil_store_begin_cached() answers a cache hit
 *     without a callback), never inside the submitting call, never
 *     before the batch's commit (or the read) returned, exactly once per
 *     call that returned 0. Keep it short (post the result to your
 *     loop: uv_async_send, a pipe): the thread that runs it may be the
 *     one that leads the next batch;
 *   - the callback may submit further asynchronous calls; it must not call
 *     a blocking store call nor resil_store_free();
 *   - the key and hash are copied; `out` (begin) and the response's
 *     headers and body (complete) must stay valid and untouched until the
 *     callback ran;
 *   - resil_store_free() fails every call still queued with
 *     RESIL_ECANCELED (invoking its callback, on the freeing thread), lets
 *     the batches that already run finish (their callbacks run), and joins
 *     the writer threads. Do not submit while or after freeing.
 *
 * The asynchronous form needs group commit (store.batch_max >= 2, the
 * default). An asynchronous begin reads first, batched with the other
 * asynchronous begins' reads on a connection of its own (a store thread
 * for reads: SQLite's WAL lets it read beside the writer): a replay, a
 * mismatch or a live lease ("in progress") is answered from that read
 * without entering a write batch; a key with no record, or an expired
 * lease, goes on to a write batch, whose claim decides (the read is only
 * a hint: at most once and lease fencing rest on the claim). A completion the database
 * cannot take goes to the journal as for resil_store_complete(), on the
 * store's thread, before the callback.
 *
 * Returns 0 (queued: cb will run once), or an error and cb never runs:
 * RESIL_EINVAL (a bad key or response, no callback, batching off),
 * RESIL_ERANGE (a response over 1 GiB), RESIL_ENOMEM (no memory, or no
 * writer thread could start).
 */
typedef void (*resil_store_cb)(int rc, const resil_err *err, void *ud);

RESIL_API int resil_store_begin_async(resil_store *s, const resil_store_key *k,
                                      const uint8_t hash[RESIL_SHA256_LEN],
                                      resil_store_result *out, resil_store_cb cb, void *ud,
                                      resil_err *err);
RESIL_API int resil_store_complete_async(resil_store *s, const resil_store_key *k,
                                         uint64_t lease, const resil_store_response *r,
                                         resil_store_cb cb, void *ud, resil_err *err);
RESIL_API int resil_store_release_async(resil_store *s, const resil_store_key *k,
                                        uint64_t lease, resil_store_cb cb, void *ud,
                                        resil_err *err);
RESIL_API int resil_store_renew_async(resil_store *s, const resil_store_key *k,
                                      uint64_t lease, resil_store_cb cb, void *ud,
                                      resil_err *err);

/* ---- the transactional form ----------------------------------------------- */

/* The databases' own connection types, declared here so that this header
 * needs neither sqlite3.h nor libpq-fe.h (sqlite3 *, PGconn *). */
struct sqlite3;
struct pg_conn;

/*
 * The application's connection, inside the application's open transaction,
 * for the store's calls to run in. Set the one field that matches the
 * store's backend; it must reach the same database (the same SQLite file,
 * the same PostgreSQL database) the store was opened on, which created the
 * table.
 */
typedef struct resil_store_tx {
    struct sqlite3 *sqlite;   /* a "sqlite:" store; BEGIN IMMEDIATE first */
    struct pg_conn *postgres; /* a "postgres://" store; any isolation level */
    resil_reserved reserved_[2]; /* room to grow (docs/abi.md) */
} resil_store_tx;

/*
 * begin() and complete() as statements of the application's own
 * transaction, so that the key's record commits or rolls back together
 * with the business write:
 *
 *     BEGIN; begin_in → FIRST; INSERT the order; complete_in; COMMIT
 *
 * A crash or a ROLLBACK anywhere before COMMIT leaves neither the order
 * nor the key, so the client's retry runs exactly once more; after COMMIT
 * the retry replays. The verdicts and the table are those of begin() and
 * complete(). There is no release_in: rolling back releases.
 *
 * Nothing is retried and nothing is rolled back here: the application's
 * transaction is the unit to run again. On any error, roll it back; on
 * RESIL_EBUSY (locked, a serialization failure, a lost connection), run
 * the whole transaction again, with resil_retry_execute() and the public
 * classifiers if you like. RESIL_EINVAL when the matching tx field is NULL
 * or the connection is not inside an open transaction. A key whose
 * completion waits in the store's journal answers IN_PROGRESS; complete_in
 * never journals (a failed complete_in must roll the business write back).
 */
RESIL_API int resil_store_begin_in(resil_store *s, const resil_store_tx *tx,
                                   const resil_store_key *k,
                                   const uint8_t hash[RESIL_SHA256_LEN],
                                   resil_store_result *out, resil_err *err);
RESIL_API int resil_store_complete_in(resil_store *s, const resil_store_tx *tx,
                                      const resil_store_key *k, uint64_t lease,
                                      const resil_store_response *r, resil_err *err);

/* Delete every record created more than `retention` ago; *deleted (may be
 * NULL) says how many. Batched, it deletes in chunks that keep to about a
 * tenth of the time while key writes come (see "Retention and purge" in
 * docs/idempotency.md), so it takes about ten times longer then. */
RESIL_API int resil_store_purge(resil_store *s, uint64_t *deleted, resil_err *err);
/* The same, for a purge on a thread of its own that must end when the
 * application does: once `stop` (may be NULL) fires, the purge stops
 * before its next chunk, its wait cut short, and returns RESIL_ECANCELED
 * with *deleted saying what went; a token fired before the call deletes
 * nothing. (Freeing the store during a purge stops it alike, and waits
 * for it.) */
RESIL_API int resil_store_purge_cancellable(resil_store *s, resil_cancel *stop,
                                            uint64_t *deleted, resil_err *err);

RESIL_END_DECLS

#endif
