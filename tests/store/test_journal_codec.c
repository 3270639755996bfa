/*
 * test_journal_codec.c — the journal's record codec, one refusal per test.
 *
 * The journal is read back after a crash, so its decoder refuses anything
 * that is not one whole, intact completion record. A flipped bit fails the
 * CRC; every other refusal sits behind it, where a fuzzer seldom gets. So
 * each test here encodes a good record, breaks one thing in its payload,
 * writes the CRC the broken payload has, and expects RESIL_ESYNTAX with
 * nothing consumed: the check after the CRC is what refuses it.
 */
#include "test.h"

#include "../../src/store/store_internal.h"

#define HEADER 8 /* payload length, CRC */
/* offsets in the payload of the record good() makes */
#define AT_TYPE 0
#define AT_TENANT_LEN 13
#define AT_TENANT 14 /* "acme" */
#define AT_KEY_LEN 25 /* after "orders" */
#define AT_KEY 26     /* "k-1" */
#define AT_HEADERS_LEN 29

typedef struct record {
    uint8_t bytes[256];
    size_t len;
} record;

static void good(record *out)
{
    static const char headers[] = "Content-Type: text/plain\r\n";
    static const char body[] = "done";
    journal_record r = {.lease = 42,
                        .status = 201,
                        .tenant = "acme",
                        .tenant_len = 4,
                        .operation = "orders",
                        .operation_len = 6,
                        .key = "k-1",
                        .key_len = 3,
                        .headers = (const uint8_t *)headers,
                        .headers_len = sizeof headers - 1,
                        .body = (const uint8_t *)body,
                        .body_len = sizeof body - 1};
    out->len = resil__journal_encoded_size(&r);
    assert_true(out->len <= sizeof out->bytes);
    resil__journal_encode(&r, out->bytes);
}

static void put_be32(uint8_t *p, uint32_t v)
{
    for (int i = 3; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

/* The record's payload is `payload` bytes, with the CRC they have. */
static void reseal(record *r, size_t payload)
{
    put_be32(r->bytes, (uint32_t)payload);
    put_be32(r->bytes + 4, resil__journal_crc32(r->bytes + HEADER, payload));
}

static void refused(const record *r)
{
    journal_record out;
    size_t used = 12345;
    assert_int_equal(resil__journal_decode(r->bytes, r->len, &out, &used), RESIL_ESYNTAX);
    assert_int_equal(used, 0);
}

static void a_good_record_decodes_to_its_fields(void **state)
{
    (void)state;
    record r;
    good(&r);
    journal_record out;
    size_t used = 0;
    assert_int_equal(resil__journal_decode(r.bytes, r.len, &out, &used), 0);
    assert_int_equal(used, r.len);
    assert_int_equal(out.lease, 42);
    assert_int_equal(out.status, 201);
    assert_memory_equal(out.tenant, "acme", 4);
    assert_memory_equal(out.operation, "orders", 6);
    assert_memory_equal(out.key, "k-1", 3);
    assert_int_equal(out.headers_len, 26);
    assert_memory_equal(out.body, "done", 4);
}

static void the_crc_is_ieee_crc32(void **state)
{
    (void)state;
    assert_int_equal(resil__journal_crc32((const uint8_t *)"123456789", 9), 0xCBF43926u);
}

static void a_flipped_bit_fails_the_crc(void **state)
{
    (void)state;
    record r;
    good(&r);
    r.bytes[HEADER + AT_KEY] ^= 0x01;
    refused(&r);
}

static void a_record_of_another_type_is_refused(void **state)
{
    (void)state;
    record r;
    good(&r);
    r.bytes[HEADER + AT_TYPE] = 2;
    reseal(&r, r.len - HEADER);
    refused(&r);
}

static void an_empty_key_is_refused(void **state)
{
    (void)state;
    record r;
    good(&r);
    /* key length 0: the key's three bytes move into the headers' length */
    uint8_t *p = r.bytes + HEADER;
    memmove(p + AT_KEY, p + AT_KEY + 3, r.len - HEADER - AT_KEY - 3);
    p[AT_KEY_LEN] = 0;
    r.len -= 3;
    reseal(&r, r.len - HEADER);
    refused(&r);
}

static void an_unprintable_byte_in_the_tenant_is_refused(void **state)
{
    (void)state;
    record r;
    good(&r);
    r.bytes[HEADER + AT_TENANT + 1] = 0x1f;
    reseal(&r, r.len - HEADER);
    refused(&r);
    good(&r);
    r.bytes[HEADER + AT_TENANT + 1] = 0x7f;
    reseal(&r, r.len - HEADER);
    refused(&r);
}

static void bytes_left_over_after_the_body_are_refused(void **state)
{
    (void)state;
    record r;
    good(&r);
    r.bytes[r.len++] = 'x';
    reseal(&r, r.len - HEADER);
    refused(&r);
}

static void a_field_running_past_the_payload_is_refused(void **state)
{
    (void)state;
    record r;
    good(&r);
    r.bytes[HEADER + AT_TENANT_LEN] = 200; /* far past the payload's end */
    reseal(&r, r.len - HEADER);
    refused(&r);
}

static void a_length_cut_off_by_the_payloads_end_is_refused(void **state)
{
    (void)state;
    record r;
    good(&r);
    /* the tenant takes the rest of the payload: no byte for the next length */
    r.bytes[HEADER + AT_TENANT_LEN] = (uint8_t)(r.len - HEADER - AT_TENANT);
    reseal(&r, r.len - HEADER);
    refused(&r);
}

static void a_blob_over_a_gibibyte_is_refused(void **state)
{
    (void)state;
    record r;
    good(&r);
    put_be32(r.bytes + HEADER + AT_HEADERS_LEN, (UINT32_C(1) << 30) + 1);
    reseal(&r, r.len - HEADER);
    refused(&r);
}

static void a_payload_shorter_than_its_fixed_fields_is_refused(void **state)
{
    (void)state;
    record r;
    good(&r);
    r.len = HEADER + 23; /* one short of type, lease, status and the five lengths */
    reseal(&r, 23);
    refused(&r);
}

static void a_payload_longer_than_the_bytes_given_is_refused(void **state)
{
    (void)state;
    record r;
    good(&r);
    put_be32(r.bytes, (uint32_t)(r.len - HEADER + 1));
    refused(&r);
}

static void a_record_shorter_than_its_header_is_refused(void **state)
{
    (void)state;
    record r;
    good(&r);
    r.len = HEADER - 1;
    refused(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_good_record_decodes_to_its_fields),
        cmocka_unit_test(the_crc_is_ieee_crc32),
        cmocka_unit_test(a_flipped_bit_fails_the_crc),
        cmocka_unit_test(a_record_of_another_type_is_refused),
        cmocka_unit_test(an_empty_key_is_refused),
        cmocka_unit_test(an_unprintable_byte_in_the_tenant_is_refused),
        cmocka_unit_test(bytes_left_over_after_the_body_are_refused),
        cmocka_unit_test(a_field_running_past_the_payload_is_refused),
        cmocka_unit_test(a_length_cut_off_by_the_payloads_end_is_refused),
        cmocka_unit_test(a_blob_over_a_gibibyte_is_refused),
        cmocka_unit_test(a_payload_shorter_than_its_fixed_fields_is_refused),
        cmocka_unit_test(a_payload_longer_than_the_bytes_given_is_refused),
        cmocka_unit_test(a_record_shorter_than_its_header_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
