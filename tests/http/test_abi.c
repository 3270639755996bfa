/*
 * test_abi.c — the HTTP adapter's public structs keep their room and their
 * recorded layout under libresil-http's SONAME (docs/abi.md); the core's
 * own structs are checked by unit.abi.
 */
#include "abi_room.h"
#include "resil/http.h"

GREW_INTO_ROOM(resil_http_opts, retry_after_headers, 3, 4);
HAS_ROOM(resil_http_request, 2);
HAS_ROOM(resil_http_result, 4);

PINNED(resil_http_opts, 528);
PINNED(resil_http_request, 144);
PINNED(resil_http_result, 432);
PINNED(resil_http_response, 64);
/* core structs embedded in the adapter's: a core change moves these */
PINNED_AT(resil_http_opts, retry, 24);
PINNED_AT(resil_http_opts, breaker, 224);
/* a member that took a reserved slot: the size stayed */
PINNED_AT(resil_http_request, user, 112);
PINNED_AT(resil_http_request, trace, 120);

static void defaults_zero_the_reserved_slots(void **state)
{
    (void)state;
    DEFAULTED_ZEROES_ROOM(resil_http_opts, resil_http_opts_default);
    DEFAULTED_ZEROES_ROOM(resil_http_request, resil_http_request_default);
}

static void embedded_defaults_zero_their_slots(void **state)
{
    (void)state;
    resil_http_opts o;
    memset(&o, 0xA5, sizeof o);
    resil_http_opts_default(&o);
    ABI_ASSERT_ROOM_ZEROED(o.retry.reserved_);
    ABI_ASSERT_ROOM_ZEROED(o.retry.backoff.reserved_);
    abi_assert_zeroed(o.breaker.reserved_, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_zero_the_reserved_slots),
        cmocka_unit_test(embedded_defaults_zero_their_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
