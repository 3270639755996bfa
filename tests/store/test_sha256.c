/*
 * test_sha256.c — SHA-256 against the FIPS 180-2 vectors, fed whole and in
 * pieces, and the request hash's field framing.
 */
#include "test.h"

#include "resil/store.h"

static void hex(const uint8_t d[RESIL_SHA256_LEN], char out[65])
{
    for (int i = 0; i < RESIL_SHA256_LEN; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void assert_sha256(const void *data, size_t len, const char *expected)
{
    uint8_t d[RESIL_SHA256_LEN];
    char text[65];
    resil_sha256(data, len, d);
    hex(d, text);
    assert_string_equal(text, expected);
}

static void fips_one_block_message_abc(void **state)
{
    (void)state;
    assert_sha256("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void fips_two_block_message(void **state)
{
    (void)state;
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    assert_sha256(m, strlen(m), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void fips_million_a(void **state)
{
    (void)state;
    char *m = malloc(1000000);
    assert_non_null(m);
    memset(m, 'a', 1000000);
    assert_sha256(m, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(m);
}

static void empty_message(void **state)
{
    (void)state;
    assert_sha256("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert_sha256(NULL, 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

/* Lengths around the padding boundary (55, 56, 63, 64 bytes) exercise the
 * one-block and two-block final paths. */
static void padding_boundaries(void **state)
{
    (void)state;
    char m[64];
    memset(m, 'a', sizeof m);
    assert_sha256(m, 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    assert_sha256(m, 56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
    assert_sha256(m, 63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34");
    assert_sha256(m, 64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

static void incremental_matches_one_shot_for_every_split(void **state)
{
    (void)state;
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    size_t len = strlen(m);
    uint8_t whole[RESIL_SHA256_LEN], parts[RESIL_SHA256_LEN];
    resil_sha256(m, len, whole);
    for (size_t a = 0; a <= len; a++) {
        for (size_t b = a; b <= len; b += 7) {
            resil_sha256_ctx c;
            resil_sha256_init(&c);
            resil_sha256_update(&c, m, a);
            resil_sha256_update(&c, m + a, b - a);
            resil_sha256_update(&c, m + b, len - b);
            resil_sha256_final(&c, parts);
            assert_memory_equal(whole, parts, RESIL_SHA256_LEN);
        }
    }
}

static void request_hash_frames_each_field_with_its_length(void **state)
{
    (void)state;
    uint8_t a[RESIL_SHA256_LEN], b[RESIL_SHA256_LEN];
    resil_store_request_hash("POST", "/ab", "c", 1, a);
    resil_store_request_hash("POST", "/a", "bc", 2, b);
    assert_memory_not_equal(a, b, RESIL_SHA256_LEN);
    resil_store_request_hash("POS", "T/a", "", 0, a);
    resil_store_request_hash("POST", "/a", "", 0, b);
    assert_memory_not_equal(a, b, RESIL_SHA256_LEN);
}

static void request_hash_is_sha256_of_the_documented_framing(void **state)
{
    (void)state;
    /* 8-byte big-endian length, then the bytes, for each field. */
    const uint8_t framed[] = {0, 0, 0, 0, 0, 0, 0, 4, 'P', 'O', 'S', 'T',
                              0, 0, 0, 0, 0, 0, 0, 2, '/', 'x',
                              0, 0, 0, 0, 0, 0, 0, 3, '{', '}', '\n'};
    uint8_t expected[RESIL_SHA256_LEN], got[RESIL_SHA256_LEN];
    resil_sha256(framed, sizeof framed, expected);
    resil_store_request_hash("POST", "/x", "{}\n", 3, got);
    assert_memory_equal(expected, got, RESIL_SHA256_LEN);
}

static void request_hash_treats_null_as_empty(void **state)
{
    (void)state;
    uint8_t a[RESIL_SHA256_LEN], b[RESIL_SHA256_LEN];
    resil_store_request_hash(NULL, NULL, NULL, 0, a);
    resil_store_request_hash("", "", "", 0, b);
    assert_memory_equal(a, b, RESIL_SHA256_LEN);
}

static void request_hash_depends_on_body_bytes(void **state)
{
    (void)state;
    uint8_t a[RESIL_SHA256_LEN], b[RESIL_SHA256_LEN];
    resil_store_request_hash("POST", "/orders", "{\"qty\":1}", 9, a);
    resil_store_request_hash("POST", "/orders", "{\"qty\":2}", 9, b);
    assert_memory_not_equal(a, b, RESIL_SHA256_LEN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fips_one_block_message_abc),
        cmocka_unit_test(fips_two_block_message),
        cmocka_unit_test(fips_million_a),
        cmocka_unit_test(empty_message),
        cmocka_unit_test(padding_boundaries),
        cmocka_unit_test(incremental_matches_one_shot_for_every_split),
        cmocka_unit_test(request_hash_frames_each_field_with_its_length),
        cmocka_unit_test(request_hash_is_sha256_of_the_documented_framing),
        cmocka_unit_test(request_hash_treats_null_as_empty),
        cmocka_unit_test(request_hash_depends_on_body_bytes),
    };
    return cmocka_run_group_tests_name("store.sha256", tests, NULL, NULL);
}
