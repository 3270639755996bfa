/*
 * abi_room.h — the layout assertions every library's public structs get
 * (docs/abi.md), shared by the core's unit.abi and each adapter's abi test.
 *
 * Two kinds, both compile-time: HAS_ROOM says a caller-allocated struct
 * still ends in its reserved slots, so a member added later takes one and
 * nothing moves (GREW_INTO_ROOM, once members have taken some); PINNED and PINNED_AT record the struct's size and an
 * embedded member's offset on LP64, so a layout change cannot land without
 * the test (and the SONAME) changing with it. The run-time half checks that
 * *_default() leaves the slots zeroed, since zero means "as before".
 */
#ifndef RESIL_TEST_ABI_ROOM_H
#define RESIL_TEST_ABI_ROOM_H

#include "test.h"

/* reserved_ is there, holds `n` slots, and nothing follows it. */
#define HAS_ROOM(T, n)                                                                \
    _Static_assert(sizeof(((T *)0)->reserved_) == (n) * sizeof(resil_reserved),       \
                   #T " keeps " #n " reserved slots");                                \
    _Static_assert(offsetof(T, reserved_) + sizeof(((T *)0)->reserved_) == sizeof(T), \
                   #T ": reserved_ is the last member")

/* Members added under this SONAME took `taken` of the `n` slots the
 * struct had, starting at `first`: the size and every older offset stay. */
#define GREW_INTO_ROOM(T, first, taken, n)                                            \
    HAS_ROOM(T, (n) - (taken));                                                      \
    _Static_assert(offsetof(T, first) + (n) * sizeof(resil_reserved) == sizeof(T),    \
                   #T ": the new members sit where its reserved slots were")

/* Members added under this SONAME took all `n` slots the struct had,
 * starting at `first`, and `last` sits in the last: the struct is full. */
#define GREW_INTO_ALL_ROOM(T, first, last, n)                                         \
    _Static_assert(offsetof(T, first) + (n) * sizeof(resil_reserved) == sizeof(T),    \
                   #T ": the new members sit where its reserved slots were");         \
    _Static_assert(offsetof(T, last) + sizeof(resil_reserved) == sizeof(T),           \
                   #T ": " #last " took the last slot")

/* The recorded layout on LP64 (x86-64, AArch64); other data models are not
 * pinned. A failure here means the ABI changed: bump the library's ABI
 * number (CMakeLists.txt) and record the new figure. */
#if defined(__LP64__) && (defined(__x86_64__) || defined(__aarch64__))
#define PINNED(T, bytes) \
    _Static_assert(sizeof(T) == (bytes), #T " is " #bytes " bytes on LP64 (docs/abi.md)")
#define PINNED_AT(T, member, at)             \
    _Static_assert(offsetof(T, member) == (at), \
                   #T "." #member " sits at byte " #at " on LP64 (docs/abi.md)")
#else
#define PINNED(T, bytes) _Static_assert(sizeof(T) > 0, #T)
#define PINNED_AT(T, member, at) _Static_assert(offsetof(T, member) >= 0, #T)
#endif

static inline void abi_assert_zeroed(const resil_reserved *r, size_t n)
{
    static const unsigned char zero[4 * sizeof(resil_reserved)];
    assert_true(n * sizeof *r <= sizeof zero);
    assert_memory_equal(r, zero, n * sizeof *r);
}

/* Every slot an array of reserved slots still has, however many members
 * have taken others since. */
#define ABI_ASSERT_ROOM_ZEROED(slots) \
    abi_assert_zeroed((slots), sizeof(slots) / sizeof((slots)[0]))

/* Fill with garbage first, as a stack variable would be, then default. */
#define DEFAULTED_ZEROES_ROOM(T, call)                                                  \
    do {                                                                                \
        T v_;                                                                           \
        memset(&v_, 0xA5, sizeof v_);                                                   \
        call(&v_);                                                                      \
        abi_assert_zeroed(v_.reserved_, sizeof v_.reserved_ / sizeof v_.reserved_[0]); \
    } while (0)

#endif
