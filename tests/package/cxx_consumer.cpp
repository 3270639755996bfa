// cxx_consumer.cpp — a C++ program using resil through the umbrella header:
// the extern "C" guards must make every call link against the C library by
// its C name, and the header's macros and structs must be valid C++. It
// retries an operation written as a capture-less lambda on the fake clock,
// so it finishes at once and prints a fixed line.
#include <cstdio>
#include <cstring>

#include <resil.h>

int main()
{
    if (std::strcmp(resil_version(), RESIL_VERSION_STRING) != 0)
        return 1;

    resil_fake_clock *fc = nullptr;
    if (resil_fake_clock_new(0, 0, &fc) != 0)
        return 1;

    resil_retry_policy policy;
    resil_retry_policy_default(&policy);
    policy.backoff.base = RESIL_MS(100);
    policy.max_total = RESIL_S(10);

    resil_exec_opts opts = resil_exec_opts();
    opts.clock = resil_fake_clock_clock(fc);

    resil_op_fn fail_twice = [](resil_attempt_ctx *ctx) -> resil_outcome {
        int *calls = static_cast<int *>(ctx->user);
        if (++*calls < 3)
            return resil_fail(RESIL_TRANSIENT, 503, "unavailable");
        return resil_ok();
    };

    int calls = 0;
    resil_retry_result res;
    resil_err err;
    int rc = resil_retry_execute(&policy, &opts, fail_twice, &calls, &res, &err);
    std::size_t sleeps = resil_fake_clock_sleep_count(fc);
    resil_fake_clock_free(fc);
    if (rc != 0) {
        std::fprintf(stderr, "resil_retry_execute: %s\n", err.message);
        return 1;
    }
    std::printf("C++: %s after %u attempts, %zu waits\n", resil_stop_name(res.stop),
                static_cast<unsigned>(res.attempts), sleeps);
    return res.stop == RESIL_STOP_SUCCEEDED ? 0 : 1;
}
