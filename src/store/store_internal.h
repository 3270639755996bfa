/*
 * store_internal.h — what the store's front (store.c) and its backends
 * (store_sqlite.c, store_pg.c) share.
 *
 * The front owns everything that is the same for every database: options,
 * key checks, the connection pool, the clock, and the retry loop that runs
 * each call as one whole transaction. A backend only knows how to run one
 * call on one connection, once, and to say whether a failure may be retried.
 * That split keeps the execution strategy in one place.
 */
#ifndef RESIL_STORE_INTERNAL_H
#define RESIL_STORE_INTERNAL_H

#include <pthread.h>
#include <semaphore.h>

#include "resil/store.h"

typedef struct store_conn store_conn; /* a backend's connection slot */

/* SQLite's writers in this process, in the order they came (batch.c). A
 * plain mutex would let a purge, which takes the lock again the moment it
 * lets go of it, starve every batch queued behind it: a ticket each keeps
 * them taking turns. */
typedef struct store_write_lock {
    pthread_mutex_t mu;
    pthread_cond_t turn;
    uint64_t next, serving;
} store_write_lock;

void resil__write_lock_init(store_write_lock *l);
void resil__write_lock_destroy(store_write_lock *l);
void resil__write_lock(store_write_lock *l);
void resil__write_unlock(store_write_lock *l);

/* What the backends read from the options. Lives as long as the store. */
typedef struct store_config {
    const char *target;  /* SQLite: the file path; PostgreSQL: the whole URL */
    char table[64];      /* a validated identifier */
    int busy_timeout_ms; /* SQLite only */
    int sqlite_sync;     /* SQLite only: a resil_store_sync */
    /* SQLite only: the store's writers queue here. The file has one writer
     * at a time anyway; a lock hands it over at once, where SQLite's busy
     * handler would poll with sleeps of up to 100 ms. */
    store_write_lock *write_lock;
} store_config;

typedef enum store_op {
    STORE_CONNECT, /* only make sure the connection and the schema exist */
    STORE_PEEK,    /* BEGIN's plain read: answer a settled record, if any */
    STORE_READ,    /* the asynchronous BEGIN's read: a settled record or a live lease */
    STORE_BEGIN,
    STORE_COMPLETE,
    STORE_RELEASE,
    STORE_RENEW,
    STORE_PURGE
} store_op;

/* One call, refreshed by the front before each attempt (times: Unix ms). */
typedef struct store_call {
    store_op op;
    const char *tenant, *operation, *key; /* never NULL */
    const uint8_t *hash;                  /* BEGIN */
    int64_t now_ms;
    int64_t lease_until_ms;               /* BEGIN, RENEW: now + lease */
    int64_t cutoff_ms;                    /* PURGE: now - retention */
    uint32_t purge_limit;                 /* PURGE: delete at most this many */
    uint64_t lease;                       /* COMPLETE, RELEASE, RENEW */
    const resil_store_response *resp;     /* COMPLETE */
    resil_store_result *out;              /* BEGIN */
    /* results */
    bool answered;    /* PEEK, READ: the record answers the begin and out is filled */
    bool alone;       /* in a batch: not decided there, run the call on its own */
    bool owned;       /* COMPLETE, RELEASE, RENEW: the row was ours and changed */
    uint64_t deleted; /* PURGE */
} store_call;

typedef struct store_backend {
    const char *name;
    /* Allocate an unconnected slot (no I/O). */
    int (*conn_new)(const store_config *cfg, store_conn **out);
    void (*conn_free)(store_conn *c);
    /* Run the call as one transaction, connecting first if needed. A
     * failure's kind says its class (see STORE_UNAVAILABLE); the database's
     * full message goes to msg. */
    resil_outcome (*run)(store_conn *c, store_call *call, char *msg, size_t cap);
    /* Group commit: run calls[0..n) (BEGIN, COMPLETE, RELEASE, RENEW, PURGE) as
     * one transaction with one commit, connecting first if needed. Any
     * failure rolls the whole batch back and is classified as for run().
     * A call the backend cannot decide inside the batch (PostgreSQL: a
     * BEGIN whose insert met an existing record, or a second call for a
     * key the batch already carries) gets `alone`, and the front runs it
     * again on its own once the batch committed. */
    resil_outcome (*run_batch)(store_conn *c, store_call *const *calls, size_t n, char *msg,
                               size_t cap);
    /* Read calls[0..n) (READ) without a transaction of the store's own
     * and without writing: each whose record answers it (see
     * resil__store_settled) gets `answered` and its result; the others are
     * left as they were. One round trip where the database allows. */
    resil_outcome (*run_reads)(store_conn *c, store_call *const *calls, size_t n, char *msg,
                               size_t cap);
    /* The transactional form (BEGIN or COMPLETE only): is the
     * application's connection inside an open transaction, and run the
     * call once in it, without transaction control or retries. */
    bool (*in_transaction)(void *conn);
    resil_outcome (*run_in)(void *conn, const store_config *cfg, store_call *call, char *msg,
                            size_t cap);
} store_backend;

/* A failure's kind sorts it into the three classes of store.h:
 *   RESIL_TRANSIENT    worth running the whole transaction again now
 *                      (locked, a serialization failure, a lost connection);
 *                      RESIL_EBUSY once the retry policy runs out;
 *   STORE_UNAVAILABLE  the database cannot serve and will not within the
 *                      retry policy (a full disk, an I/O error): RESIL_EBUSY
 *                      at once, without spending the attempts;
 *   RESIL_PERMANENT    a retry cannot change it (a constraint, a schema or a
 *                      data error): RESIL_EBACKEND at once.
 * The retry policy's default classifier retries only the first. */
#define STORE_UNAVAILABLE ((resil_kind)(RESIL_KIND_USER + 1))

/* The purge's condition beside the age, in both backends' SQL (`now` is
 * the placeholder of now in Unix ms): a completed record, or one whose
 * lease has run out. A run still holding its key — a long one that renews
 * its lease — keeps its record however old it is, so the purge never
 * takes a key from under a live run. */
#define PURGEABLE(now) "(status IS NOT NULL OR lease_expires_at <= " now ")"

extern const store_backend resil__store_sqlite;
extern const store_backend resil__store_pg;

/* Copy `tmpl` into buf with every "{T}" replaced by `table`. Returns 0, or
 * RESIL_ERANGE when it does not fit. */
int resil__store_sql(char *buf, size_t cap, const char *tmpl, const char *table);

/* A record as a backend read it, for the front to judge. */
typedef struct store_row {
    const void *hash;
    size_t hash_len;
    bool completed; /* status is not NULL */
    int status;
    const void *headers;
    size_t headers_len;
    const void *body;
    size_t body_len;
    int64_t created_ms;
    int64_t lease_expires_ms;
} store_row;

/* BEGIN's verdicts, decided in one place for every backend: the record is
 * ours (FIRST, with its lease number), or an existing row is a mismatch, in
 * progress or a replay. Return 0, or RESIL_ENOMEM copying the response. */
int resil__store_first(store_call *call, uint64_t lease);
/* The lease number a record inserted at created_ms starts with (its
 * takeovers add 1 each): no later incarnation of the key can reuse it. */
uint64_t resil__store_first_lease(int64_t created_ms);
int resil__store_classify(store_call *call, const store_row *row);
/* Is the record's answer final whatever happens next (completed, or
 * another request's)? Then a plain read may give it: completed records are
 * immutable until purged, so no transaction is needed to trust one. For a
 * READ a live lease answers too ("in progress" as of the read: the claim
 * would give the same answer, a moment later); an expired one does not,
 * as only the claim may take it over. */
bool resil__store_settled(const store_call *call, const store_row *row);

/* A failure outcome with `kind`, `code` and a short detail, and the long
 * message copied into msg. */
resil_outcome resil__store_fail(resil_kind kind, int64_t code, const char *detail,
                                const char *long_msg, char *msg, size_t cap);

/* ---- group commit (batch.c) ------------------------------------------------ */

/* One call waiting for, or carried by, a batch; lives on its caller's
 * stack. The runner sets rc and, when rc != 0, err. */
typedef struct batch_member {
    store_call *call;
    int rc;
    resil_err *err; /* the caller's; may be NULL */
    /* private to batch.c */
    struct batch_member *next;
    sem_t wake; /* posted once: its batch ran (done), or it leads the next */
    bool done;
    bool async; /* nobody waits on wake: the runner's finish ends it */
} batch_member;

/* Run members[0..n) as one batch and set every member's rc (and err). */
typedef void (*batch_run_fn)(void *ud, batch_member *const *members, size_t n);
/* An asynchronous member's batch ran (or the batcher was freed first:
 * rc RESIL_ECANCELED): answer it. Called once, on the thread that ran the
 * batch (or frees the batcher), after the batch's blocking members woke. */
typedef void (*batch_finish_fn)(void *ud, batch_member *m);

typedef struct store_batcher store_batcher;

#define STORE_MAX_BATCH 1024 /* store.batch_max's upper bound */
#define STORE_MAX_RUNNING 32 /* batches at once: half of store.connections' bound */

typedef struct batcher_opts {
    uint32_t max;           /* calls per batch, >= 2 */
    resil_duration window;  /* how long a batch's first call waits for more */
    unsigned max_running;   /* batches run at once (SQLite: 1) */
    resil_clock *clock;     /* the window is slept on it */
    batch_run_fn run;
    batch_finish_fn finish;
    void *ud;
} batcher_opts;

int resil__batcher_new(const batcher_opts *o, store_batcher **out);
/* Fail every queued member with RESIL_ECANCELED (finishing each), let the
 * batches that run end, join the writers, free. */
void resil__batcher_free(store_batcher *b);
/* Queue the call and return once a batch carrying it ran: its rc. The
 * calling thread may run batches (its own included) meanwhile. */
int resil__batcher_submit(store_batcher *b, store_call *call, resil_err *err);
/* Queue an asynchronous member (heap, owned by the runner until its
 * finish) and return at once: 0, RESIL_ENOMEM when no writer thread could
 * start, RESIL_ESTATE when the batcher is being freed. */
int resil__batcher_submit_async(store_batcher *b, batch_member *m);
void resil__batcher_stats(store_batcher *b, resil_store_batch_stats *out);
/* Background work giving way to the key writes: how many calls were ever
 * queued, and (busy, may be NULL) whether one is queued or running now. */
uint64_t resil__batcher_arrivals(store_batcher *b, bool *busy);

/* ---- the journal (journal.c) ---------------------------------------------- */

#define JOURNAL_MAGIC_LEN 8

/* One completion as encoded in the file: a view, pointing into a buffer
 * (decode) or at the caller's data (encode). */
typedef struct journal_record {
    uint64_t lease;
    int status;
    const char *tenant, *operation, *key; /* not NUL-terminated */
    size_t tenant_len, operation_len, key_len;
    const uint8_t *headers, *body;
    size_t headers_len, body_len;
} journal_record;

/* A pending completion, owned by the journal. */
typedef struct journal_entry {
    char tenant[RESIL_STORE_FIELD_MAX + 1];
    char operation[RESIL_STORE_FIELD_MAX + 1];
    char key[RESIL_STORE_FIELD_MAX + 1];
    uint64_t lease;
    resil_store_response resp; /* points at headers and body below */
    char *headers;
    uint8_t *body;
    bool done; /* reached the database (or was dropped) */
} journal_entry;

/* The open, locked file and its entries. The store guards it with a mutex. */
typedef struct store_journal {
    char *path;
    int fd;
    size_t end;   /* offset after the last good record */
    size_t torn;  /* bytes of a torn tail found at open (cut off) */
    journal_entry **items;
    size_t n, cap;
    size_t pending; /* entries not done */
} store_journal;

/* Decode the record at the start of buf. 0 with *consumed set, or
 * RESIL_ESYNTAX when the bytes are not one whole, intact record (short,
 * bad checksum, bad lengths or fields). Reads only buf[0..len). */
int resil__journal_decode(const uint8_t *buf, size_t len, journal_record *out,
                          size_t *consumed);
size_t resil__journal_encoded_size(const journal_record *r);
void resil__journal_encode(const journal_record *r, uint8_t *out);
/* A record is [payload length, 4 bytes][CRC-32 of the payload, 4 bytes]
 * [payload], big-endian; the CRC is IEEE 802.3's (zlib's). */
uint32_t resil__journal_crc32(const uint8_t *p, size_t len);

/* Open (creating) and lock the file, load its records, cut a torn tail.
 * RESIL_EBUSY when another store holds it, RESIL_EINVAL when it is not a
 * journal, RESIL_EIO, RESIL_ENOMEM. */
int resil__journal_open(const char *path, store_journal **out, resil_err *err);
void resil__journal_close(store_journal *j);
/* Append and fsync one completion, and keep it as a pending entry. */
int resil__journal_append(store_journal *j, const journal_record *r, resil_err *err);
/* Every entry is done: empty the file back to its magic, drop the entries. */
int resil__journal_truncate(store_journal *j, resil_err *err);

/* ---- the replay cache (cache.c) --------------------------------------------- */

/* Completed records in memory, bounded by bytes; NULL when off (bound 0),
 * and every function below does nothing then. expires_ms: the record's
 * created instant plus the store's retention; an entry is used only
 * before it. */
typedef struct store_cache store_cache;

int resil__cache_new(size_t bound, store_cache **out);
void resil__cache_free(store_cache *c);
/* A live completed record of the begin's key: fill call->out (REPLAY or
 * MISMATCH, by call->hash) and return true. call->now_ms must be set. */
bool resil__cache_answer(store_cache *c, store_call *call);
/* The database answered the begin REPLAY: keep that record; or FIRST:
 * remember the claim, for its completion. */
void resil__cache_begun(store_cache *c, const store_call *call, int64_t expires_ms);
/* A COMPLETE or RELEASE of call->lease ran: the claim becomes the record
 * (completed) or is forgotten. */
void resil__cache_settled(store_cache *c, const store_call *call, bool completed);
/* Begins the cache answered; 0 when it is off. */
uint64_t resil__cache_hits(store_cache *c);

#endif
