/*
 * test_curl_loop.c — the curl multi loop driver (src/http/curl_loop.c)
 * with its own sockets, as the gateway's upstream uses it.
 *
 * The loop is the tests' virtual loop; the sockets are real. A connection
 * attempt to a listener whose accept queue is full never completes (the
 * kernel drops the SYN), so a transfer with a 1 ms connect timeout is cut
 * while connecting, which is when libcurl closes the socket without the
 * close callback and reports CURL_POLL_REMOVE afterwards. What the loop
 * watches is read when the transfer is reported: the virtual loop's poll
 * would otherwise stop a watch on a closed descriptor itself (POLLNVAL),
 * where libuv aborts.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "../../src/http/curl_loop.h"
#include "virtual_loop.h"

typedef struct outcome {
    bool done;
    CURLcode code;
    size_t watched; /* descriptors the loop watched when it was reported */
} outcome;

static void on_done(void *ud, CURL *easy, void *priv, CURLcode code)
{
    (void)easy;
    const virtual_loop *vl = ud;
    outcome *o = priv;
    o->code = code;
    o->watched = vl->nios;
    o->done = true;
}

/* A loopback listener whose accept queue is full: `fillers` hold it. */
static int full_listener(int fillers[2], int *port)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(l, 0), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
    for (int i = 0; i < 2; i++) {
        fillers[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        (void)connect(fillers[i], (struct sockaddr *)&a, sizeof a);
    }
    *port = ntohs(a.sin_port);
    return l;
}

static void a_socket_cut_while_connecting_leaves_no_watch_behind(void **state)
{
    (void)state;
    resil_fake_clock *fc;
    assert_int_equal(resil_fake_clock_new(0, 0, &fc), 0);
    virtual_loop vl;
    virtual_loop_init(&vl, fc);
    resil__curl_loop *cl;
    assert_int_equal(resil__curl_loop_new(&vl.loop, on_done, &vl, &cl), 0);
    int fillers[2], port;
    int l = full_listener(fillers, &port);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
    CURL *easy = curl_easy_init();
    outcome o = {.done = false};
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 1L);
    curl_easy_setopt(easy, CURLOPT_PRIVATE, &o);
    resil__curl_loop_own_sockets(cl, easy);
    assert_int_equal(curl_multi_add_handle(resil__curl_loop_multi(cl), easy), CURLM_OK);

    virtual_loop_run(&vl, &o.done);

    assert_int_equal(o.code, CURLE_OPERATION_TIMEDOUT);
    assert_int_equal(o.watched, 0);
    curl_multi_remove_handle(resil__curl_loop_multi(cl), easy);
    curl_easy_cleanup(easy);
    resil__curl_loop_free(cl);
    virtual_loop_destroy(&vl);
    resil_fake_clock_free(fc);
    close(fillers[0]);
    close(fillers[1]);
    close(l);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_socket_cut_while_connecting_leaves_no_watch_behind),
    };
    int failed = cmocka_run_group_tests_name("http.curl_loop", tests, NULL, NULL);
    curl_global_cleanup();
    return failed;
}
