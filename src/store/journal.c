/*
 * journal.c — the store's journal file: completions the database could not
 * take, kept durable on local disk until it can.
 *
 * The file is append-only: an 8-byte magic, then records, each
 *
 *     u32 payload length | u32 CRC-32 of the payload | payload
 *
 * (big-endian) whose payload is one completion: lease, status, tenant,
 * operation, key (each with a one-byte length), headers and body (each with
 * a four-byte length). A crash can only tear the last record, so the reader
 * stops at the first record that is short, over-long, fails its checksum or
 * does not decode exactly to its length, and the file is cut back to the
 * end of the last good one before anything is appended: a torn tail is
 * ignored, never misread, and never hides a later record. Every append is
 * fsync'ed (and the directory, when the file is new) before it counts.
 * When every entry has reached the database the file is truncated back to
 * its magic. An exclusive flock() keeps a second store, in this process or
 * another, from sharing the file.
 *
 * The decoder takes bytes and nothing else, so the fuzz target
 * (tests/store/fuzz_store_journal.c) drives exactly the code that reads a
 * file after a crash. Entries are held in memory while pending: the store
 * answers begin() for their keys from here without touching the file.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_internal.h"

static const uint8_t magic[JOURNAL_MAGIC_LEN] = {'r', 'e', 's', 'i', 'l', 'J', '1', '\n'};

#define RECORD_HEADER 8
#define RECORD_COMPLETION 1
#define MAX_BLOB ((size_t)1 << 30)
/* type, lease, status, three one-byte and two four-byte lengths */
#define FIXED_PAYLOAD (1 + 8 + 4 + 3 + 4 + 4)

/* ---- CRC-32 (IEEE 802.3, reflected) ------------------------------------- */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t resil__journal_crc32(const uint8_t *p, size_t len)
{
    pthread_once(&crc_once, crc_init);
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < len; i++)
        c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* ---- the codec ----------------------------------------------------------- */

static uint64_t get_be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

static uint8_t *put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    return p + n;
}

static bool printable(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return false;
    return true;
}

size_t resil__journal_encoded_size(const journal_record *r)
{
    return RECORD_HEADER + FIXED_PAYLOAD + r->tenant_len + r->operation_len + r->key_len +
           r->headers_len + r->body_len;
}

static uint8_t *put_field(uint8_t *p, const void *data, size_t len, int width)
{
    p = put_be(p, len, width);
    if (len > 0)
        memcpy(p, data, len);
    return p + len;
}

void resil__journal_encode(const journal_record *r, uint8_t *out)
{
    uint8_t *p = out + RECORD_HEADER;
    *p++ = RECORD_COMPLETION;
    p = put_be(p, r->lease, 8);
    p = put_be(p, (uint32_t)r->status, 4);
    p = put_field(p, r->tenant, r->tenant_len, 1);
    p = put_field(p, r->operation, r->operation_len, 1);
    p = put_field(p, r->key, r->key_len, 1);
    p = put_field(p, r->headers, r->headers_len, 4);
    p = put_field(p, r->body, r->body_len, 4);
    size_t payload = (size_t)(p - out) - RECORD_HEADER;
    put_be(out, payload, 4);
    put_be(out + 4, resil__journal_crc32(out + RECORD_HEADER, payload), 4);
}

/* A cursor over one payload: every take checks what is left first. */
typedef struct cursor {
    const uint8_t *p;
    size_t left;
} cursor;

static bool take(cursor *c, size_t n, const uint8_t **out)
{
    if (n > c->left)
        return false;
    *out = c->p;
    c->p += n;
    c->left -= n;
    return true;
}

static bool take_int(cursor *c, int width, uint64_t *v)
{
    const uint8_t *p;
    if (!take(c, (size_t)width, &p))
        return false;
    *v = get_be(p, width);
    return true;
}

static bool take_field(cursor *c, int width, size_t max, const uint8_t **data, size_t *len)
{
    uint64_t n;
    if (!take_int(c, width, &n) || n > max)
        return false;
    *len = (size_t)n;
    return take(c, *len, data);
}

static bool decode_payload(cursor *c, journal_record *r)
{
    const uint8_t *type, *t, *o, *k;
    uint64_t lease, status;
    if (!take(c, 1, &type) || *type != RECORD_COMPLETION || !take_int(c, 8, &lease) ||
        !take_int(c, 4, &status) ||
        !take_field(c, 1, RESIL_STORE_FIELD_MAX, &t, &r->tenant_len) ||
        !take_field(c, 1, RESIL_STORE_FIELD_MAX, &o, &r->operation_len) ||
        !take_field(c, 1, RESIL_STORE_FIELD_MAX, &k, &r->key_len) ||
        !take_field(c, 4, MAX_BLOB, &r->headers, &r->headers_len) ||
        !take_field(c, 4, MAX_BLOB, &r->body, &r->body_len))
        return false;
    r->lease = lease;
    r->status = (int)(int32_t)(uint32_t)status;
    r->tenant = (const char *)t;
    r->operation = (const char *)o;
    r->key = (const char *)k;
    return c->left == 0 && r->key_len > 0 && printable(r->tenant, r->tenant_len) &&
           printable(r->operation, r->operation_len) && printable(r->key, r->key_len);
}

int resil__journal_decode(const uint8_t *buf, size_t len, journal_record *out,
                          size_t *consumed)
{
    *consumed = 0;
    if (len < RECORD_HEADER)
        return RESIL_ESYNTAX;
    uint64_t payload = get_be(buf, 4);
    uint32_t sum = (uint32_t)get_be(buf + 4, 4);
    if (payload > len - RECORD_HEADER || payload < FIXED_PAYLOAD)
        return RESIL_ESYNTAX;
    if (resil__journal_crc32(buf + RECORD_HEADER, (size_t)payload) != sum)
        return RESIL_ESYNTAX;
    cursor c = {buf + RECORD_HEADER, (size_t)payload};
    journal_record r;
    if (!decode_payload(&c, &r))
        return RESIL_ESYNTAX;
    *out = r;
    *consumed = RECORD_HEADER + (size_t)payload;
    return 0;
}

/* ---- entries ------------------------------------------------------------- */

static void entry_free(journal_entry *e)
{
    if (e == NULL)
        return;
    free(e->headers);
    free(e->body);
    free(e);
}

static void copy_text(char *dst, const char *src, size_t len)
{
    if (len > 0)
        memcpy(dst, src, len);
    dst[len] = '\0';
}

static void *copy_blob(const void *src, size_t len)
{
    uint8_t *p = malloc(len + 1);
    if (p != NULL) {
        if (len > 0)
            memcpy(p, src, len);
        p[len] = '\0';
    }
    return p;
}

static journal_entry *entry_new(const journal_record *r)
{
    journal_entry *e = calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    copy_text(e->tenant, r->tenant, r->tenant_len);
    copy_text(e->operation, r->operation, r->operation_len);
    copy_text(e->key, r->key, r->key_len);
    e->lease = r->lease;
    e->resp.status = r->status;
    e->headers = copy_blob(r->headers, r->headers_len);
    e->body = copy_blob(r->body, r->body_len);
    if (e->headers == NULL || e->body == NULL) {
        entry_free(e);
        return NULL;
    }
    e->resp.headers = e->headers;
    e->resp.headers_len = r->headers_len;
    e->resp.body = e->body;
    e->resp.body_len = r->body_len;
    return e;
}

static void clear_entries(store_journal *j)
{
    for (size_t i = 0; i < j->n; i++)
        entry_free(j->items[i]);
    j->n = 0;
}

/* ---- the file ------------------------------------------------------------ */

static int pwrite_all(int fd, const uint8_t *p, size_t len, off_t at)
{
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
        at += n;
    }
    return 0;
}

static int reserve(store_journal *j)
{
    if (j->n < j->cap)
        return 0;
    size_t cap = j->cap ? j->cap * 2 : 16;
    journal_entry **p = realloc(j->items, cap * sizeof *p);
    if (p == NULL)
        return RESIL_ENOMEM;
    j->items = p;
    j->cap = cap;
    return 0;
}

/* Make a new file's name durable: fsync the directory holding it. */
static int sync_dir(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static int io_error(resil_err *err, const store_journal *j, const char *what)
{
    return resil_err_set(err, RESIL_EIO, "store.journal '%.120s': %s: %s", j->path, what,
                         strerror(errno));
}

/* Read the whole file: NULL with *len 0 for an empty one. A read that
 * fails part way is an error, not the file's end: what follows would be
 * taken for a torn tail and cut off, and the records in it lost. */
static int slurp(store_journal *j, uint8_t **out, size_t *len, resil_err *err)
{
    struct stat st;
    *out = NULL;
    *len = 0;
    if (fstat(j->fd, &st) != 0)
        return io_error(err, j, "stat");
    if (st.st_size == 0)
        return 0;
    uint8_t *buf = malloc((size_t)st.st_size);
    if (buf == NULL)
        return resil_err_set(err, RESIL_ENOMEM, "store.journal: out of memory reading it");
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = pread(j->fd, buf + got, (size_t)st.st_size - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int rc = io_error(err, j, "read");
            free(buf);
            return rc;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    *out = buf;
    *len = got;
    return 0;
}

/* Load every good record; cut a torn tail off. */
static int load(store_journal *j, resil_err *err)
{
    uint8_t *buf;
    size_t len;
    int rc = slurp(j, &buf, &len, err);
    if (rc != 0)
        return rc;
    size_t at = JOURNAL_MAGIC_LEN;
    /* A crash while the file was being created can leave part of the
     * magic: that is a new, empty journal. */
    if (len > 0 && len < JOURNAL_MAGIC_LEN && memcmp(buf, magic, len) == 0)
        len = 0;
    if (len > 0 && (len < JOURNAL_MAGIC_LEN || memcmp(buf, magic, JOURNAL_MAGIC_LEN) != 0)) {
        free(buf);
        return resil_err_set(err, RESIL_EINVAL, "store.journal '%.120s' is not a resil store "
                                                "journal", j->path);
    }
    while (rc == 0 && at < len) {
        journal_record r;
        size_t used;
        if (resil__journal_decode(buf + at, len - at, &r, &used) != 0)
            break; /* a torn tail: ignored */
        journal_entry *e = entry_new(&r);
        if (e == NULL || reserve(j) != 0) {
            entry_free(e);
            rc = resil_err_set(err, RESIL_ENOMEM, "store.journal: out of memory loading it");
            break;
        }
        j->items[j->n++] = e;
        at += used;
    }
    free(buf);
    j->pending = j->n;
    if (rc != 0)
        return rc;
    j->torn = len > at ? len - at : 0;
    j->end = len == 0 ? 0 : at;
    return 0;
}

/* Give the file its magic (new) or cut it back to its last good record. */
static int settle(store_journal *j, bool created, resil_err *err)
{
    if (j->end == 0) {
        if (ftruncate(j->fd, 0) != 0 || pwrite_all(j->fd, magic, JOURNAL_MAGIC_LEN, 0) != 0)
            return io_error(err, j, "write");
        j->end = JOURNAL_MAGIC_LEN;
    } else if (j->torn > 0 && ftruncate(j->fd, (off_t)j->end) != 0) {
        return io_error(err, j, "truncate");
    }
    if (fsync(j->fd) != 0)
        return io_error(err, j, "fsync");
    if (created && sync_dir(j->path) != 0)
        return io_error(err, j, "fsync of its directory");
    return 0;
}

int resil__journal_open(const char *path, store_journal **out, resil_err *err)
{
    *out = NULL;
    store_journal *j = calloc(1, sizeof *j);
    if (j == NULL || (j->path = strdup(path)) == NULL) {
        free(j);
        return resil_err_set(err, RESIL_ENOMEM, "store: out of memory");
    }
    bool created = false;
    j->fd = open(path, O_RDWR | O_CLOEXEC);
    if (j->fd < 0 && errno == ENOENT) {
        j->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        created = j->fd >= 0;
    }
    int rc = 0;
    if (j->fd < 0)
        rc = io_error(err, j, "open");
    else if (flock(j->fd, LOCK_EX | LOCK_NB) != 0)
        rc = errno == EWOULDBLOCK
                 ? resil_err_set(err, RESIL_EBUSY,
                                 "store.journal '%.120s' is in use by another store", path)
                 : io_error(err, j, "flock");
    if (rc == 0)
        rc = load(j, err);
    if (rc == 0)
        rc = settle(j, created, err);
    if (rc != 0) {
        resil__journal_close(j);
        return rc;
    }
    *out = j;
    return 0;
}

void resil__journal_close(store_journal *j)
{
    if (j == NULL)
        return;
    if (j->fd >= 0)
        close(j->fd); /* releases the lock */
    clear_entries(j);
    free(j->items);
    free(j->path);
    free(j);
}

int resil__journal_append(store_journal *j, const journal_record *r, resil_err *err)
{
    size_t size = resil__journal_encoded_size(r);
    journal_entry *e = entry_new(r);
    uint8_t *buf = malloc(size);
    if (e == NULL || buf == NULL || reserve(j) != 0) {
        entry_free(e);
        free(buf);
        return resil_err_set(err, RESIL_ENOMEM, "store.journal: out of memory");
    }
    resil__journal_encode(r, buf);
    int rc = 0;
    if (pwrite_all(j->fd, buf, size, (off_t)j->end) != 0 || fsync(j->fd) != 0) {
        rc = io_error(err, j, "append");
        /* Whatever reached the file lies past the end: the next append
         * overwrites it, and a reader stops before it. */
        int ignored = ftruncate(j->fd, (off_t)j->end);
        (void)ignored;
    }
    free(buf);
    if (rc != 0) {
        entry_free(e);
        return rc;
    }
    j->items[j->n++] = e;
    j->end += size;
    j->pending++;
    return 0;
}

int resil__journal_truncate(store_journal *j, resil_err *err)
{
    if (ftruncate(j->fd, JOURNAL_MAGIC_LEN) != 0 || fsync(j->fd) != 0)
        return io_error(err, j, "truncate");
    clear_entries(j);
    j->end = JOURNAL_MAGIC_LEN;
    j->pending = 0;
    return 0;
}
