/*
 * test_abi.c — the configuration's public structs keep their room and
 * their recorded layout under libresil-config's SONAME (docs/abi.md); the
 * core's own structs are checked by unit.abi.
 */
#include "abi_room.h"
#include "resil/config.h"

HAS_ROOM(resil_config_diag, 1);
HAS_ROOM(resil_config_diags, 4);
GREW_INTO_ROOM(resil_config_retry, disable_for, 3, 4);
HAS_ROOM(resil_config_ratelimit, 4);
HAS_ROOM(resil_config_distributed, 4);
HAS_ROOM(resil_config_step, 4);
HAS_ROOM(resil_config_pipeline, 4);
HAS_ROOM(resil_config_analysis_opts, 4);
HAS_ROOM(resil_config_analysis, 4);
HAS_ROOM(resil_config_report, 4);
HAS_ROOM(resil_policies_opts, 4);
HAS_ROOM(resil_policy, 4);
HAS_ROOM(resil_config_hedge, 4);

PINNED(resil_config_diag, 528);
PINNED(resil_config_diags, 56);
PINNED(resil_config_retry, 232);
PINNED(resil_config_ratelimit, 128);
PINNED(resil_config_distributed, 224);
PINNED(resil_config_step, 64);
PINNED(resil_config_pipeline, 560);
PINNED(resil_config_analysis_opts, 40);
PINNED(resil_config_analysis, 672);
PINNED(resil_config_report, 104);
PINNED(resil_policies_opts, 112);
PINNED(resil_policy, 56);
/* core structs embedded in the configuration's */
PINNED_AT(resil_config_retry, policy, 0);
PINNED_AT(resil_config_ratelimit, opts, 0);
PINNED_AT(resil_config_distributed, breaker, 16);

static void defaults_zero_the_reserved_slots(void **state)
{
    (void)state;
    DEFAULTED_ZEROES_ROOM(resil_policies_opts, resil_policies_opts_default);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_zero_the_reserved_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
