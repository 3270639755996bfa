/*
 * main.c — one adapter, called the way its user would, chosen by USE_<NAME>:
 * each prints "<name>: " and a value that only the adapter's code computes,
 * so the line shows the program both compiled against the installed header
 * (which may include its dependency's, such as curl.h or uv.h) and linked
 * against the adapter and its dependencies.
 */
#include <stdio.h>

#include <resil.h>

#if USE_HTTP
#include <resil/http.h>
static int run(void)
{
    unsigned bits = 0;
    if (resil_http_methods_parse("GET,POST", &bits) != 0)
        return 1;
    printf("http: POST %s\n",
           resil_http_method_retryable("POST", false) ? "retried" : "sent once");
    return 0;
}
#elif USE_STORE
#include <resil/store.h>
static int run(void)
{
    uint8_t d[RESIL_SHA256_LEN];
    resil_sha256("abc", 3, d);
    printf("store: sha256(abc) %02x%02x%02x%02x\n", d[0], d[1], d[2], d[3]);
    return 0;
}
#elif USE_REDIS
#include <resil/redis.h>
static int run(void)
{
    resil_redis_opts o;
    resil_redis_opts_default(&o);
    resil_redis *r = NULL;
    resil_err err;
    int rc = resil_redis_new(&o, &r, &err);
    resil_redis_free(r);
    printf("redis: a missing url is %s\n", rc == RESIL_EINVAL ? "refused" : "taken");
    return 0;
}
#elif USE_CONFIG
#include <string.h>
#include <resil/config.h>
static int run(void)
{
    const char *text = "{\"Resilience\": {\"Retry\": {\"api\": {\"MaxRetryAttempts\": 2}}}}";
    resil_config *c;
    if (resil_config_parse(text, strlen(text), &c, NULL) != 0)
        return 1;
    printf("config: %zu retry policy\n", resil_config_count(c, RESIL_CONFIG_RETRY));
    resil_config_free(c);
    return 0;
}
#elif USE_UV
#include <resil/uv.h>
static int run(void)
{
    uv_loop_t loop;
    resil_uv *u;
    if (uv_loop_init(&loop) != 0 || resil_uv_new(&loop, &u) != 0)
        return 1;
    printf("uv: %s\n", resil_uv_loop(u) != NULL ? "a loop" : "no loop");
    resil_uv_close(u);
    uv_run(&loop, UV_RUN_DEFAULT);
    return uv_loop_close(&loop) != 0;
}
#elif USE_OTLP
#include <resil/otlp.h>
static int run(void)
{
    resil_otlp_opts o;
    resil_otlp_opts_default(&o);
    o.endpoint = "localhost:4318";
    resil_otlp *x = NULL;
    int rc = resil_otlp_new(&o, &x, NULL);
    resil_otlp_free(x);
    printf("otlp: a URL without a scheme is %s\n", rc == RESIL_EINVAL ? "refused" : "taken");
    return 0;
}
#else
#error "define one USE_<ADAPTER>"
#endif

int main(void) { return run(); }
