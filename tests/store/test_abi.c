/*
 * test_abi.c — the idempotency store's public structs keep their room and
 * their recorded layout under libresil-store's SONAME (docs/abi.md); the
 * core's own structs are checked by unit.abi.
 */
#include "abi_room.h"
#include "resil/store.h"

HAS_ROOM(resil_sha256_ctx, 2);
/* batch_window, batch_max, sqlite_sync, cache_bytes took all four */
GREW_INTO_ALL_ROOM(resil_store_opts, batch_window, cache_bytes, 4);
HAS_ROOM(resil_store_key, 4);
HAS_ROOM(resil_store_response, 4);
HAS_ROOM(resil_store_result, 3);
HAS_ROOM(resil_store_journal_stats, 4);
/* the reads' counts and the cache's hits */
GREW_INTO_ALL_ROOM(resil_store_batch_stats, read_batches, cache_hits, 4);
HAS_ROOM(resil_store_tx, 2);

PINNED(resil_sha256_ctx, 128);
PINNED(resil_store_opts, 288);
PINNED(resil_store_key, 56);
PINNED(resil_store_response, 72);
PINNED(resil_store_result, 120);
PINNED(resil_store_journal_stats, 64);
PINNED(resil_store_batch_stats, 56);
PINNED(resil_store_tx, 32);
/* the core's retry policy embedded */
PINNED_AT(resil_store_opts, retry, 48);
/* the members that took reserved slots, where the slots were */
PINNED_AT(resil_store_opts, batch_window, 256);
PINNED_AT(resil_store_opts, batch_max, 264);
PINNED_AT(resil_store_opts, sqlite_sync, 272);
PINNED_AT(resil_store_opts, cache_bytes, 280);
PINNED_AT(resil_store_batch_stats, read_batches, 24);
PINNED_AT(resil_store_batch_stats, reads, 32);
PINNED_AT(resil_store_batch_stats, read_answers, 40);
PINNED_AT(resil_store_batch_stats, cache_hits, 48);

static void embedded_defaults_zero_their_slots(void **state)
{
    (void)state;
    resil_store_opts o;
    memset(&o, 0xA5, sizeof o);
    resil_store_opts_default(&o);
    ABI_ASSERT_ROOM_ZEROED(o.retry.reserved_);
    ABI_ASSERT_ROOM_ZEROED(o.retry.backoff.reserved_);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(embedded_defaults_zero_their_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
