/*
 * output.h — figures the writers derive from results, shared by the text,
 * JSON, CSV and SVG writers so that every format states the same numbers.
 */
#ifndef RESIL_SIM_OUTPUT_H
#define RESIL_SIM_OUTPUT_H

#include "sim.h"

/* Means per second over the time after the outage (or trigger) ended. */
typedef struct resil__sim_after {
    double offered, goodput, retries;
    size_t bins;
} resil__sim_after;

resil__sim_after resil__sim_after_outage(const resil_sim_config *c, const resil_sim_result *r);
/* attempts^layers: the calls one user request causes when everything fails. */
uint64_t resil__sim_worst_case(const resil_sim_config *c);
/* The layer holding the budget (1-based), or 0 for every layer. */
uint32_t resil__sim_budget_layer(const resil_sim_config *c);
/* Whether and when a policy recovered, in a table's column ("after 7s",
 * "at once", "stays down", "3/5 runs, after 4s") or as a chart panel's
 * title says it ("recovered after 7 s", "recovered at once", "did not
 * recover", "recovered in 3 of 5 runs, after 2.5 s"). */
typedef enum resil__sim_wording { RESIL__SIM_COLUMN, RESIL__SIM_TITLE } resil__sim_wording;
void resil__sim_recovery_text(const resil_sim_result *r, resil__sim_wording w, char *buf,
                              size_t cap);

#endif
