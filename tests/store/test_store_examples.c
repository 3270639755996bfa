/*
 * test_store_examples.c — the store's examples run as they are shipped:
 * examples/store/orders_tx.c must print exactly what docs/idempotency.md
 * shows, which is also its specification (the failed request leaves no
 * order and no key; its retry creates the order once; a further one
 * replays; two orders in all).
 */
#include <stdio.h>

#include "test.h"

static void orders_tx_commits_the_key_with_the_order(void **state)
{
    (void)state;
    char *dir = test_tmpdir();
    char cmd[1200], out[4096] = "";
    snprintf(cmd, sizeof cmd, "'%s' '%s/orders.db'", ORDERS_TX_BINARY, dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    assert_int_equal(pclose(p), 0);
    assert_string_equal(
        out,
        "k-1   {\"qty\":1}  -> 201 {\"order\":1,\"request\":{\"qty\":1}} (first: ran it)\n"
        "k-1   {\"qty\":1}  -> 201 {\"order\":1,\"request\":{\"qty\":1}} (replayed)\n"
        "k-2   {\"qty\":2}  -> crashed before COMMIT: no order, no key\n"
        "k-2   {\"qty\":2}  -> 201 {\"order\":2,\"request\":{\"qty\":2}} (first: ran it)\n"
        "k-2   {\"qty\":2}  -> 201 {\"order\":2,\"request\":{\"qty\":2}} (replayed)\n"
        "k-1   {\"qty\":9}  -> 422 key reused with a different request\n"
        "orders created: 2\n");
    test_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(orders_tx_commits_the_key_with_the_order),
    };
    return cmocka_run_group_tests_name("store.examples", tests, NULL, NULL);
}
