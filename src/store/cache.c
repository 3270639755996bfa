/*
 * cache.c — completed records kept in memory, so that a replay (or a
 * mismatch) of a completed key is answered without the database.
 *
 * Why it is safe: a completed record never changes until the purge deletes
 * it, so a copy answers exactly as the database would, in any process of a
 * fleet, for as long as the record lives. Each entry carries the instant
 * its record becomes purgeable (created + store.retention) and is not used
 * at or after it. An in-progress record is never answered from here: only
 * the database may say who owns a lease. A key this process claims is
 * remembered (its hash, its created instant, its lease) so that its own
 * completion can enter the cache with the response it stored.
 *
 * Shape: one hash table of chained entries and one LRU list, under one
 * mutex; an entry is one allocation (the entry, the key's three parts,
 * the headers and the body). The bound counts all of it: the keys, the
 * responses and ENTRY_COST per entry for the rest (a claim is little else,
 * and a bound that counted only the bytes it carries would let a cache of
 * claims grow several times past it); inserting past it evicts the least
 * recently used entries first. This is
 * the simplest shape a lock can guard in a few instructions per call: the
 * copy of a hit's response is the only work done under it.
 */
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

typedef struct cache_entry {
    struct cache_entry *chain;       /* the bucket's next */
    struct cache_entry *prev, *next; /* the LRU list: head is the newest */
    uint64_t h;                      /* the key's hash */
    uint64_t lease;                  /* claimed: the lease that may complete it */
    bool completed;
    int64_t created_ms, expires_ms;
    int status;
    uint8_t req_hash[RESIL_SHA256_LEN];
    size_t id_len, headers_len, body_len, bytes;
    char *id; /* tenant \0 operation \0 key \0, then headers, then body */
} cache_entry;

struct store_cache {
    pthread_mutex_t mu;
    size_t bound, bytes;
    size_t n, n_buckets;
    cache_entry **buckets;
    cache_entry *newest, *oldest;
    uint64_t hits;
};

#define MIN_BUCKETS 64

/* What an entry costs besides its key and response: the struct, the
 * allocator's header, and its share of the buckets (at most two slots:
 * they double when they are as many as the entries). A round figure, so
 * that a bound can be stated in entries (docs/idempotency.md). */
#define ENTRY_COST 192
_Static_assert(sizeof(cache_entry) + 4 * sizeof(void *) <= ENTRY_COST,
               "ENTRY_COST covers an entry's bookkeeping");

int resil__cache_new(size_t bound, store_cache **out)
{
    *out = NULL;
    if (bound == 0)
        return 0;
    store_cache *c = calloc(1, sizeof *c);
    if (c == NULL || (c->buckets = calloc(MIN_BUCKETS, sizeof *c->buckets)) == NULL) {
        free(c);
        return RESIL_ENOMEM;
    }
    c->n_buckets = MIN_BUCKETS;
    c->bound = bound;
    pthread_mutex_init(&c->mu, NULL);
    *out = c;
    return 0;
}

void resil__cache_free(store_cache *c)
{
    if (c == NULL)
        return;
    for (cache_entry *e = c->newest, *next; e != NULL; e = next) {
        next = e->next;
        free(e);
    }
    pthread_mutex_destroy(&c->mu);
    free(c->buckets);
    free(c);
}

/* The key's three parts, each with its terminator, in buf (of cap bytes):
 * the length, or 0 when it does not fit. */
static size_t make_id(const store_call *call, char *buf, size_t cap)
{
    size_t t = strlen(call->tenant) + 1, o = strlen(call->operation) + 1,
           k = strlen(call->key) + 1;
    if (t + o + k > cap)
        return 0;
    memcpy(buf, call->tenant, t);
    memcpy(buf + t, call->operation, o);
    memcpy(buf + t + o, call->key, k);
    return t + o + k;
}

static uint64_t fnv1a(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

#define ID_MAX (3 * (RESIL_STORE_FIELD_MAX + 1))

typedef struct cache_key {
    char id[ID_MAX];
    size_t len;
    uint64_t h;
} cache_key;

static bool key_of(const store_call *call, cache_key *k)
{
    k->len = make_id(call, k->id, sizeof k->id);
    k->h = fnv1a(k->id, k->len);
    return k->len > 0;
}

static cache_entry **slot(store_cache *c, const cache_key *k)
{
    cache_entry **p = &c->buckets[k->h & (c->n_buckets - 1)];
    for (; *p != NULL; p = &(*p)->chain)
        if ((*p)->h == k->h && (*p)->id_len == k->len && memcmp((*p)->id, k->id, k->len) == 0)
            return p;
    return p;
}

static void unlink_lru(store_cache *c, cache_entry *e)
{
    *(e->prev ? &e->prev->next : &c->newest) = e->next;
    *(e->next ? &e->next->prev : &c->oldest) = e->prev;
}

static void push_newest(store_cache *c, cache_entry *e)
{
    e->prev = NULL;
    e->next = c->newest;
    *(c->newest ? &c->newest->prev : &c->oldest) = e;
    c->newest = e;
}

/* Unlink *p (found by slot()) from both lists and free it. */
static void drop_at(store_cache *c, cache_entry **p)
{
    cache_entry *e = *p;
    *p = e->chain;
    unlink_lru(c, e);
    c->bytes -= e->bytes;
    c->n--;
    free(e);
}

/* Drop e itself: its bucket's chain holds it, found by pointer. */
static void drop_entry(store_cache *c, cache_entry *e)
{
    cache_entry **p = &c->buckets[e->h & (c->n_buckets - 1)];
    while (*p != e)
        p = &(*p)->chain;
    drop_at(c, p);
}

/* Double the buckets when the chains grow past one entry on average. */
static void grow(store_cache *c)
{
    if (c->n < c->n_buckets)
        return;
    size_t nb = c->n_buckets * 2;
    cache_entry **b = calloc(nb, sizeof *b);
    if (b == NULL)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < c->n_buckets; i++) {
        for (cache_entry *e = c->buckets[i], *next; e != NULL; e = next) {
            next = e->chain;
            e->chain = b[e->h & (nb - 1)];
            b[e->h & (nb - 1)] = e;
        }
    }
    free(c->buckets);
    c->buckets = b;
    c->n_buckets = nb;
}

/* Replace the key's entry (if any) with e, then evict the oldest until
 * the bytes fit the bound. An entry larger than the bound is not kept. */
static void insert(store_cache *c, const cache_key *k, cache_entry *e)
{
    cache_entry **p = slot(c, k);
    if (*p != NULL)
        drop_at(c, p);
    if (e->bytes > c->bound) {
        free(e);
        return;
    }
    while (c->bytes + e->bytes > c->bound)
        drop_entry(c, c->oldest);
    p = slot(c, k);
    e->chain = NULL;
    *p = e;
    push_newest(c, e);
    c->bytes += e->bytes;
    c->n++;
    grow(c);
}

static cache_entry *entry_new(const cache_key *k, size_t headers_len, size_t body_len)
{
    size_t extra = k->len + headers_len + body_len;
    cache_entry *e = calloc(1, sizeof *e + extra);
    if (e == NULL)
        return NULL;
    e->id = (char *)(e + 1);
    memcpy(e->id, k->id, k->len);
    e->id_len = k->len;
    e->h = k->h;
    e->headers_len = headers_len;
    e->body_len = body_len;
    e->bytes = ENTRY_COST + extra;
    return e;
}

static void fill_response(cache_entry *e, const void *headers, const void *body)
{
    if (e->headers_len > 0)
        memcpy(e->id + e->id_len, headers, e->headers_len);
    if (e->body_len > 0)
        memcpy(e->id + e->id_len + e->headers_len, body, e->body_len);
}

/* The record is live in the cache: answer the begin as the database would
 * (a replay, or a mismatch when the hash differs). */
bool resil__cache_answer(store_cache *c, store_call *call)
{
    cache_key k;
    if (c == NULL || !key_of(call, &k))
        return false;
    pthread_mutex_lock(&c->mu);
    cache_entry **p = slot(c, &k), *e = *p;
    bool hit = e != NULL && e->completed && call->now_ms < e->expires_ms;
    if (e != NULL && e->completed && !hit) {
        drop_at(c, p); /* past its record's expiry: never again */
    } else if (hit) {
        unlink_lru(c, e);
        push_newest(c, e);
        store_row row = {
            .hash = e->req_hash,
            .hash_len = RESIL_SHA256_LEN,
            .completed = true,
            .status = e->status,
            .headers = e->id + e->id_len,
            .headers_len = e->headers_len,
            .body = e->id + e->id_len + e->headers_len,
            .body_len = e->body_len,
            .created_ms = e->created_ms,
        };
        hit = resil__store_classify(call, &row) == 0;
        c->hits += hit;
    }
    pthread_mutex_unlock(&c->mu);
    return hit;
}

/* The database answered the begin REPLAY (its completed record) or FIRST
 * (this process's claim: no response, a lease): either is kept. */
void resil__cache_begun(store_cache *c, const store_call *call, int64_t expires_ms)
{
    const resil_store_result *r = call->out;
    cache_key k;
    if (c == NULL || !key_of(call, &k))
        return;
    cache_entry *e = entry_new(&k, r->headers_len, r->body_len);
    if (e == NULL)
        return;
    e->completed = r->verdict == RESIL_STORE_REPLAY;
    e->lease = r->lease;
    e->created_ms = r->created_at / 1000000;
    e->expires_ms = expires_ms;
    e->status = r->status;
    memcpy(e->req_hash, call->hash, RESIL_SHA256_LEN);
    fill_response(e, r->headers, r->body);
    pthread_mutex_lock(&c->mu);
    insert(c, &k, e);
    pthread_mutex_unlock(&c->mu);
}

/* Would the answer's entry fit the bound at all? One that would not is
 * neither allocated nor copied under the lock only for insert to free it. */
static bool fits(const store_cache *c, const cache_key *k, const resil_store_response *r)
{
    return ENTRY_COST + k->len + r->headers_len + r->body_len <= c->bound;
}

/* This process completed (owned) or lost (not owned, released) the key
 * under `lease`: a claim it remembered becomes the completed record, or
 * is forgotten. */
void resil__cache_settled(store_cache *c, const store_call *call, bool completed)
{
    cache_key k;
    if (c == NULL || !key_of(call, &k))
        return;
    const resil_store_response *r = call->resp;
    cache_entry *e =
        completed && fits(c, &k, r) ? entry_new(&k, r->headers_len, r->body_len) : NULL;
    pthread_mutex_lock(&c->mu);
    cache_entry **p = slot(c, &k), *claim = *p;
    if (claim == NULL || claim->completed || claim->lease != call->lease) {
        pthread_mutex_unlock(&c->mu);
        free(e);
        return;
    }
    if (e != NULL) {
        e->completed = true;
        e->created_ms = claim->created_ms;
        e->expires_ms = claim->expires_ms;
        e->status = r->status;
        memcpy(e->req_hash, claim->req_hash, RESIL_SHA256_LEN);
        fill_response(e, r->headers, r->body);
        insert(c, &k, e);
    } else {
        drop_at(c, p);
    }
    pthread_mutex_unlock(&c->mu);
}

uint64_t resil__cache_hits(store_cache *c)
{
    if (c == NULL)
        return 0;
    pthread_mutex_lock(&c->mu);
    uint64_t hits = c->hits;
    pthread_mutex_unlock(&c->mu);
    return hits;
}
