/*
 * run.c — one policy of one scenario: validate, dispatch to the model, own
 * the result. Kept apart from the models so that each model file is only
 * its system and the library calls it makes.
 */
#include <stdlib.h>
#include <string.h>

#include "model.h"

int resil_sim_run(const resil_sim_config *c, const resil_sim_policy *p,
                  resil_sim_progress_fn progress, void *progress_ud,
                  resil_sim_result *out, resil_err *err)
{
    if (c == NULL || p == NULL || out == NULL)
        return resil_err_set(err, RESIL_EINVAL, "config, policy and result are required");
    memset(out, 0, sizeof *out);
    out->policy = *p;
    out->runs = c->runs;
    int rc = resil_sim_config_validate(c, err);
    if (rc != 0)
        return rc;
    if (c->scenario == RESIL_SIM_OCC)
        rc = resil__sim_occ(c, p, progress, progress_ud, out, err);
    else
        rc = resil__sim_stack(c, p, progress, progress_ud, out, err);
    if (rc != 0)
        resil_sim_result_free(out);
    return rc;
}

void resil_sim_result_free(resil_sim_result *r)
{
    if (r == NULL)
        return;
    free(r->series.arrivals);
    free(r->series.offered);
    free(r->series.goodput);
    free(r->series.failed);
    free(r->series.retries);
    memset(&r->series, 0, sizeof r->series);
}
