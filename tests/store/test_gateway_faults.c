/*
 * test_gateway_faults.c — "at most once" under faults, with real servers:
 * clients retry POSTs with keys through `resil gateway` while PostgreSQL is
 * stopped and started again (once shorter than the lease, once longer) and
 * the gateway is killed with SIGKILL mid-traffic and started again with the
 * same store and journal. Afterwards no key has reached the upstream more
 * than once, and every client ended with the key's one stored answer — a
 * further request with each key replays exactly what that client got — or
 * with a definite error (500 store_error: the store refused for good).
 *
 * The clients are threads with libcurl that do what a well-behaved client
 * does: the same request with the same key until an answer is final —
 * retrying connection errors, 409 and 503 — within a bound on attempts and
 * time. The faults are a fixed script, not timing: nothing asserts how
 * fast anything is, and the bounds are generous enough for a loaded 2-core
 * machine under a sanitizer. Loopback only.
 *
 * The script runs three times, once for each way the gateway's store may
 * write keys: in batches as they come (the default), in batches that wait
 * a window for company (bigger ones, so a fault strikes many requests at
 * once), and one transaction per write.
 */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gateway_proc.h"
#include "pg_server.h"
#include "test.h"
#include "upstream.h"

#define CLIENTS 6
#define KEYS_PER_CLIENT 400 /* at most; clients stop taking new keys after the faults */
#define ATTEMPTS 2000       /* per key, 25 ms apart at least: the gateway may be down */
#define LEASE "2s"

typedef struct answer {
    char key[32];
    long status;
    bool unknown; /* Idempotent-Outcome: unknown */
    char *body;
    unsigned attempts;
    bool final; /* false: it ran out of attempts */
} answer;

typedef struct world {
    char *dir;
    char journal[600];
    pg_server *pg;
    upstream *up;
    const char *batching[3]; /* the gateway's batching flags, NULL-ended */
    gateway_proc gw;
    int starts;

    pthread_mutex_t mu;
    char url[64]; /* the gateway's, as it moves between restarts */
    bool faults_done;
} world;

typedef struct client {
    world *w;
    int id;
    answer answers[KEYS_PER_CLIENT];
    size_t n;
} client;

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- the gateway, started and killed ---------------------------------------- */

static void start_gateway(world *w)
{
    char log[700];
    snprintf(log, sizeof log, "%s/gateway-%d.log", w->dir, w->starts++);
    const char *args[] = {"--upstream", upstream_url(w->up), "--store", pg_server_url(w->pg),
                          "--journal", w->journal, "--lease", LEASE, "--timeout", "30s",
                          w->batching[0], w->batching[1], NULL};
    if (gateway_start(&w->gw, test_build_path("resil"), log, args) != 0)
        fail_msg("the gateway did not start (see %s)", log);
    pthread_mutex_lock(&w->mu);
    snprintf(w->url, sizeof w->url, "%s", w->gw.url);
    pthread_mutex_unlock(&w->mu);
}

static void kill_gateway(world *w)
{
    kill(w->gw.pid, SIGKILL);
    while (waitpid(w->gw.pid, NULL, 0) < 0 && errno == EINTR)
        ;
    w->gw.pid = 0;
}

/* ---- clients -------------------------------------------------------------- */

/* One attempt; true when its answer is final: the key's stored answer (the
 * upstream's, or an unknown outcome) or an error no retry changes. */
static bool attempt(world *w, const char *key, const char *body, answer *a)
{
    char url[128], header[64];
    pthread_mutex_lock(&w->mu);
    snprintf(url, sizeof url, "%s/orders", w->url);
    pthread_mutex_unlock(&w->mu);
    snprintf(header, sizeof header, "Idempotency-Key: %s", key);
    const char *headers[] = {"Content-Type: application/json", header, NULL};
    http_reply r;
    int rc = http_request("POST", url, headers, body, &r);
    char outcome[32];
    bool unknown = rc == 0 && http_reply_header(&r, "Idempotent-Outcome", outcome,
                                                sizeof outcome);
    bool retry = rc != 0 || r.status == 409 || r.status == 503 ||
                 (r.status == 502 && !unknown); /* released: the upstream was unreachable */
    if (retry) {
        http_reply_free(&r);
        return false;
    }
    a->status = r.status;
    a->unknown = unknown;
    a->body = r.body;
    return true;
}

static void *run_client(void *arg)
{
    client *c = arg;
    world *w = c->w;
    for (c->n = 0; c->n < KEYS_PER_CLIENT; c->n++) {
        pthread_mutex_lock(&w->mu);
        bool done = w->faults_done;
        pthread_mutex_unlock(&w->mu);
        if (done)
            break;
        answer *a = &c->answers[c->n];
        snprintf(a->key, sizeof a->key, "c%d-k%zu", c->id, c->n);
        char body[64];
        snprintf(body, sizeof body, "{\"order\":\"%s\"}", a->key);
        for (a->attempts = 1; a->attempts <= ATTEMPTS; a->attempts++) {
            if (attempt(w, a->key, body, a)) {
                a->final = true;
                break;
            }
            sleep_ms(25);
        }
    }
    return NULL;
}

/* ---- the fault script ------------------------------------------------------- */

static void outage(world *w, int ms)
{
    if (pg_server_pause(w->pg) != 0)
        fail_msg("PostgreSQL did not stop");
    sleep_ms(ms);
    if (pg_server_resume(w->pg) != 0)
        fail_msg("PostgreSQL did not start again");
}

static void crash(world *w)
{
    kill_gateway(w);
    sleep_ms(200);
    start_gateway(w);
}

static void run_faults(world *w)
{
    sleep_ms(700);
    outage(w, 1000); /* shorter than the lease */
    sleep_ms(700);
    crash(w);
    sleep_ms(700);
    outage(w, 3500); /* longer than the lease */
    sleep_ms(700);
    crash(w);
    sleep_ms(700);
    crash(w);
    sleep_ms(700);
    pthread_mutex_lock(&w->mu);
    w->faults_done = true;
    pthread_mutex_unlock(&w->mu);
}

/* ---- checks afterwards ------------------------------------------------------ */

/* With nothing failing now, the key must replay what the client got. */
static void expect_replay(world *w, const answer *a)
{
    char body[64];
    snprintf(body, sizeof body, "{\"order\":\"%s\"}", a->key);
    answer again = {0};
    for (int i = 0; i < ATTEMPTS && !attempt(w, a->key, body, &again); i++)
        sleep_ms(25);
    if (again.body == NULL)
        fail_msg("key %s: no final answer afterwards", a->key);
    if (again.status != a->status || again.unknown != a->unknown ||
        strcmp(again.body, a->body) != 0)
        fail_msg("key %s: the client got %ld '%s' but the key now answers %ld '%s'", a->key,
                 a->status, a->body, again.status, again.body);
    free(again.body);
}

/* A definite error: the store refused for good (500 store_error). Allowed —
 * a client may end with one — but never a second run. */
static bool definite_error(const answer *a)
{
    return a->status == 500 && strstr(a->body, "\"error\":\"store_error\"") != NULL;
}

typedef struct tally {
    unsigned keys, unknown, errors;
} tally;

static void check_client(world *w, const client *c, tally *t)
{
    for (size_t i = 0; i < c->n; i++) {
        const answer *a = &c->answers[i];
        unsigned ran = upstream_key_requests(w->up, a->key);
        if (ran > 1)
            fail_msg("key %s reached the upstream %u times", a->key, ran);
        if (!a->final)
            fail_msg("key %s: no final answer after %u attempts", a->key, ATTEMPTS);
        t->keys++;
        if (definite_error(a)) {
            t->errors++;
            continue;
        }
        if (a->unknown) {
            assert_true(a->status == 502 || a->status == 504);
            t->unknown++;
        } else if (a->status != 201 || ran != 1) {
            fail_msg("key %s: answer %ld with %u upstream request(s): '%s'", a->key, a->status,
                     ran, a->body);
        }
        expect_replay(w, a);
    }
}

static void clients_under_restarts_and_crashes_run_each_key_at_most_once(void **state)
{
    world *w = *state;
    start_gateway(w);
    client *c = calloc(CLIENTS, sizeof *c);
    pthread_t t[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        c[i].w = w;
        c[i].id = i;
        pthread_create(&t[i], NULL, run_client, &c[i]);
    }
    run_faults(w);
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(t[i], NULL);
    tally sum = {0};
    for (int i = 0; i < CLIENTS; i++)
        check_client(w, &c[i], &sum);
    assert_int_equal(upstream_keys_seen_more_than_once(w->up), 0);
    assert_true(sum.keys >= CLIENTS);
    print_message("      %u keys, %u upstream requests, %u unknown outcomes, %u store errors\n",
                  sum.keys, upstream_requests(w->up), sum.unknown, sum.errors);
    for (int i = 0; i < CLIENTS; i++) {
        for (size_t j = 0; j < c[i].n; j++)
            free(c[i].answers[j].body);
    }
    free(c);
}

/* ---- setup ----------------------------------------------------------------- */

static int world_setup_with(void **state, const char *flag, const char *value)
{
    world *w = calloc(1, sizeof *w);
    w->batching[0] = flag;
    w->batching[1] = value;
    pthread_mutex_init(&w->mu, NULL);
    w->dir = test_tmpdir();
    w->pg = pg_server_start();
    w->up = upstream_start();
    if (w->dir == NULL || w->pg == NULL || w->up == NULL)
        return -1;
    snprintf(w->journal, sizeof w->journal, "%s/gateway.journal", w->dir);
    upstream_set_delay_ms(w->up, 40); /* so that calls are in flight when faults strike */
    *state = w;
    return 0;
}

static int batched(void **state) { return world_setup_with(state, NULL, NULL); }
static int batched_with_a_window(void **state)
{
    return world_setup_with(state, "--batch-window", "2ms");
}
static int unbatched(void **state) { return world_setup_with(state, "--batch-max", "1"); }

static int world_teardown(void **state)
{
    world *w = *state;
    int rc = w->gw.pid > 0 ? gateway_stop(&w->gw) : 0;
    if (rc != 0)
        fprintf(stderr, "the gateway exited %d, see %s/gateway-%d.log\n", rc, w->dir,
                w->starts - 1);
    upstream_stop(w->up);
    pg_server_stop(w->pg);
    if (rc == 0)
        test_rmtree(w->dir);
    free(w->dir);
    pthread_mutex_destroy(&w->mu);
    free(w);
    return rc == 0 ? 0 : -1;
}

int main(void)
{
    if (test_build_path("resil") == NULL) {
        fprintf(stderr, "RESIL_BUILD_DIR is not set\n");
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        {"clients_under_restarts_and_crashes_run_each_key_at_most_once",
         clients_under_restarts_and_crashes_run_each_key_at_most_once, batched, world_teardown,
         NULL},
        {"the_same_with_batches_that_wait_a_window",
         clients_under_restarts_and_crashes_run_each_key_at_most_once, batched_with_a_window,
         world_teardown, NULL},
        {"the_same_with_one_transaction_per_write",
         clients_under_restarts_and_crashes_run_each_key_at_most_once, unbatched,
         world_teardown, NULL},
    };
    int failed = cmocka_run_group_tests_name("store.gateway_faults", tests, NULL, NULL);
    curl_global_cleanup();
    return failed;
}
