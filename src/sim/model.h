/*
 * model.h — what the models share inside libresil_sim: turning a simulator
 * policy into the library's real retry policy and backoff, and the entry
 * point of each model. One mapping serves every model so that "full" means
 * the same resil_backoff everywhere.
 */
#ifndef RESIL_SIM_MODEL_H
#define RESIL_SIM_MODEL_H

#include "engine.h"
#include "sim.h"

/* When the outage (metastable: the trigger) ends, saturating. */
resil_duration resil__sim_outage_end(const resil_sim_config *c);

/* The wait the scenario's `naive` policy uses. */
resil_sim_wait resil__sim_default_wait(resil_sim_scenario s);

/* The resil_backoff a policy's wait means for this config. For occ, whose
 * base follows Brooker (base·2^n with n = 1 at the first retry), the first
 * exponential step is 2·base; decorrelated starts from base itself. */
void resil__sim_backoff(const resil_sim_config *c, const resil_sim_policy *p,
                        resil_backoff *out);

/* The per-layer retry policy (budget left NULL: the caller plugs in its
 * own). Never allocates. */
void resil__sim_retry_policy(const resil_sim_config *c, const resil_sim_policy *p,
                             resil_retry_policy *out);

/* One occ run: fills calls, completion time and successes. */
typedef struct resil__sim_occ_run {
    uint64_t calls;
    uint64_t successes;
    resil_instant completion;
} resil__sim_occ_run;

int resil__sim_occ(const resil_sim_config *c, const resil_sim_policy *p,
                   resil_sim_progress_fn progress, void *ud,
                   resil_sim_result *out, resil_err *err);

/* The service-stack models: failover, metastable and layers. */
int resil__sim_stack(const resil_sim_config *c, const resil_sim_policy *p,
                     resil_sim_progress_fn progress, void *ud,
                     resil_sim_result *out, resil_err *err);

#endif
