/*
 * prom_server.h — a real Prometheus server (Debian's `prometheus`) for the
 * scrape tests: started on a free loopback port with its storage and its
 * configuration in a temporary directory, scraping the targets given at
 * short intervals, and queried through its HTTP API.
 *
 * Works as root (CI) and as anyone else: Prometheus needs no privilege,
 * only a directory of its own, and dies with the test process
 * (PR_SET_PDEATHSIG) even if the test is killed.
 */
#ifndef RESIL_TEST_PROM_SERVER_H
#define RESIL_TEST_PROM_SERVER_H

#include <stdbool.h>

typedef struct prom_server prom_server;

/* Start Prometheus scraping `target` ("127.0.0.1:PORT", path /metrics)
 * every 200 ms as job "resil", and wait until it is ready. NULL on failure,
 * with the reason and Prometheus's log on stderr. */
prom_server *prom_server_start(const char *target);
void prom_server_stop(prom_server *s);

/* Evaluate an instant query whose answer is one sample (wrap in sum()),
 * into *value. false when Prometheus has no sample (yet) or the query
 * failed. */
bool prom_query(prom_server *s, const char *promql, double *value);
/* Poll prom_query until it answers `want`, up to `seconds`. The one wait
 * the scrape tests cannot avoid: Prometheus scrapes on its own schedule. */
bool prom_wait_for(prom_server *s, const char *promql, double want, int seconds);

#endif
