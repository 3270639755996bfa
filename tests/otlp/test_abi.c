/*
 * test_abi.c — the OTLP exporter's public structs keep their room and their
 * recorded layout under libresil-otlp's SONAME (docs/abi.md).
 */
#include "abi_room.h"
#include "resil/otlp.h"

GREW_INTO_ROOM(resil_otlp_opts, clock, 1, 4);
GREW_INTO_ROOM(resil_otlp_stats, spans_failed, 1, 4);

PINNED(resil_otlp_opts, 120);
PINNED(resil_otlp_stats, 72);

static void defaults_zero_the_reserved_slots(void **state)
{
    (void)state;
    DEFAULTED_ZEROES_ROOM(resil_otlp_opts, resil_otlp_opts_default);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_zero_the_reserved_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
