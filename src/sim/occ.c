/*
 * occ.c — Brooker's optimistic-concurrency contention model ("Exponential
 * Backoff And Jitter", AWS Architecture Blog, 2015).
 *
 * N clients each make one successful write to a single row. An attempt is
 * four messages, each delayed |Normal(mean, sd)|: read request, read reply
 * (carrying the row's version), write request (carrying that version), write
 * reply. The server accepts a write only if the version is still the one
 * read, and then increments it. After a rejected write the client sleeps the
 * next message's network delay plus a backoff, then reads again.
 *
 * The backoff is never computed here: each client is a resil_retry
 * execution driven through the sans-I/O step with virtual time, so the wait
 * is whatever resil_retry_after_attempt — and behind it resil_backoff_delay
 * — decides. The model is the row, the messages and the clock; the policy is
 * the library's.
 */
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "rand.h"

enum { READ_AT_SERVER, READ_REPLY, WRITE_AT_SERVER, WRITE_REPLY };

/* A client has one message in flight at a time, so the message's content
 * (the version read, whether the write was accepted) lives here. */
typedef struct occ_client {
    resil_retry retry;
    uint64_t version; /* the version its read returned */
    bool accepted;
    bool done;
} occ_client;

typedef struct occ_model {
    const resil_sim_config *cfg;
    resil_retry_policy policy;
    resil__sim_engine engine;
    resil__sim_rand rand;
    occ_client *clients;
    uint64_t version;
    resil__sim_occ_run run;
    resil_outcome ok, conflict;
    uint64_t gave_up; /* executions the retry step stopped: must stay 0 */
} occ_model;

static resil_duration net_delay(occ_model *m)
{
    return resil__sim_abs_normal(&m->rand, m->cfg->net_mean, m->cfg->net_sd);
}

static void send(occ_model *m, resil_duration extra, uint32_t kind, uint32_t client)
{
    resil_instant now = resil__sim_now(&m->engine);
    resil_instant at = resil_dur_add(resil_dur_add(now, net_delay(m)), extra);
    resil__sim_schedule(&m->engine, at, kind, client);
}

static void start_attempt(occ_model *m, uint32_t client, resil_duration wait)
{
    resil_retry_before_attempt(&m->clients[client].retry, false);
    send(m, wait, READ_AT_SERVER, client);
}

static void read_at_server(occ_model *m, uint32_t client)
{
    m->clients[client].version = m->version;
    send(m, 0, READ_REPLY, client);
}

static void write_at_server(occ_model *m, uint32_t client)
{
    occ_client *c = &m->clients[client];
    m->run.calls++;
    c->accepted = c->version == m->version;
    if (c->accepted)
        m->version++;
    send(m, 0, WRITE_REPLY, client);
}

static void write_reply(occ_model *m, uint32_t client)
{
    occ_client *c = &m->clients[client];
    resil_instant now = resil__sim_now(&m->engine);
    bool accepted = c->accepted;
    const resil_outcome *o = accepted ? &m->ok : &m->conflict;
    resil_retry_decision d =
        resil_retry_after_attempt(&c->retry, NULL, o, now, resil__sim_rng(&m->rand));
    if (accepted) {
        c->done = true;
        m->run.successes++;
        m->run.completion = now;
        return;
    }
    if (d.stop != RESIL_STOP_NONE) {
        m->gave_up++;
        return;
    }
    start_attempt(m, client, d.wait);
}

static void handle(void *model, resil__sim_engine *e, const resil__sim_event *ev)
{
    occ_model *m = model;
    uint32_t client = resil__sim_event_id(ev);
    switch (resil__sim_event_kind(ev)) {
    case READ_AT_SERVER:
        read_at_server(m, client);
        break;
    case READ_REPLY:
        send(m, 0, WRITE_AT_SERVER, client);
        break;
    case WRITE_AT_SERVER:
        write_at_server(m, client);
        break;
    case WRITE_REPLY:
        write_reply(m, client);
        break;
    }
}

static int run_once(occ_model *m, uint64_t run)
{
    resil__sim_engine_reset(&m->engine);
    resil__sim_rand_init(&m->rand, m->cfg->seed, run);
    memset(&m->run, 0, sizeof m->run);
    m->version = 0;
    for (uint32_t i = 0; i < m->cfg->clients; i++) {
        occ_client *c = &m->clients[i];
        c->done = false;
        resil_retry_begin(&c->retry, &m->policy, 0, RESIL_INSTANT_MAX, true);
        start_attempt(m, i, 0);
    }
    return resil__sim_run(&m->engine, RESIL_INSTANT_MAX, handle, m);
}

static void accumulate(resil_sim_result *out, const occ_model *m)
{
    out->calls_per_run += (double)m->run.calls;
    out->successes_per_run += (double)m->run.successes;
    out->completion_ms += resil_dur_to_ms(m->run.completion);
    out->events += m->engine.dispatched;
}

static void average(resil_sim_result *out, const resil_sim_config *c)
{
    double runs = (double)c->runs;
    out->calls_per_run /= runs;
    out->successes_per_run /= runs;
    out->completion_ms /= runs;
    out->calls_per_client = out->calls_per_run / (double)c->clients;
}

int resil__sim_occ(const resil_sim_config *c, const resil_sim_policy *p,
                   resil_sim_progress_fn progress, void *ud,
                   resil_sim_result *out, resil_err *err)
{
    occ_model m;
    memset(&m, 0, sizeof m);
    m.cfg = c;
    resil__sim_retry_policy(c, p, &m.policy);
    m.policy.max_attempts = RESIL_ATTEMPTS_FOREVER;
    m.ok = resil_ok();
    m.conflict = resil_fail(RESIL_TRANSIENT, 409, "version conflict");
    int rc = resil_retry_policy_validate(&m.policy, err);
    if (rc != 0)
        return rc;
    m.clients = calloc(c->clients, sizeof *m.clients);
    if (m.clients == NULL || resil__sim_engine_init(&m.engine, 4 * (size_t)c->clients) != 0) {
        free(m.clients);
        return resil_err_set(err, RESIL_ENOMEM, "out of memory for %u clients",
                             (unsigned)c->clients);
    }
    for (uint32_t run = 0; run < c->runs && rc == 0; run++) {
        rc = run_once(&m, run);
        accumulate(out, &m);
        if (progress != NULL)
            progress(p, (double)(run + 1) / (double)c->runs, ud);
    }
    if (rc == 0 && m.gave_up != 0)
        rc = resil_err_set(err, RESIL_ESTATE,
                           "sim occ: %llu clients stopped retrying before their write",
                           (unsigned long long)m.gave_up);
    if (rc == RESIL_ENOMEM)
        resil_err_set(err, rc, "out of memory for the event heap");
    average(out, c);
    resil__sim_engine_free(&m.engine);
    free(m.clients);
    return rc;
}
