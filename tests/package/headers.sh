#!/usr/bin/env bash
# headers.sh — package.headers: each installed public header is
# self-contained C11. A translation unit holding nothing but that header,
# included twice (so a missing include guard shows too), compiles with
# -Wall -Wextra -Werror -pedantic: a user may include any header first and
# alone, and strict-C11 projects may include ours.
. "$(dirname "$0")/lib.sh"
need_installed

dir=$(scratch headers)
cflags=(-std=c11 -Wall -Wextra -Werror -pedantic -Wstrict-prototypes -Wshadow -I"$INC")

adapter_cflags

headers=("$INC/resil.h" "$INC"/resil/*.h)
for h in "${headers[@]}"; do
    rel=${h#"$INC"/}
    printf '#include <%s>\n#include <%s>\n' "$rel" "$rel" >"$dir/tu.c"
    # libuv's own header needs POSIX (pthread_rwlock_t), as any user of it does.
    posix=()
    [[ $rel == resil/uv.h ]] && posix=(-D_POSIX_C_SOURCE=200809L)
    "$CC" -fsyntax-only "${cflags[@]}" "${posix[@]}" "${ADAPTER_CFLAGS[@]}" "$dir/tu.c" ||
        fail "<$rel> does not compile alone as C11 ($CC ${cflags[*]})"
done
note "${#headers[@]} headers are self-contained C11 ($CC ${cflags[*]})"
