#!/usr/bin/env bash
# pkgconfig.sh — package.pkgconfig: build examples/quickstart.c the way the
# README tells a user to, from nothing but the installed tree and
# `pkg-config resil`, once against the shared library and once against the
# archive, and run both.
#
# The static build pins only libresil itself to the archive
# (-Wl,-Bstatic -lresil -Wl,-Bdynamic) and takes the rest of
# `pkg-config --static --libs`, so Libs.private must be complete; a fully
# -static executable would prove no more and cannot link the sanitizer
# runtimes that the ASan/TSan builds pass in LINK_FLAGS.
. "$(dirname "$0")/lib.sh"
need_installed

dir=$(scratch pkgconfig)
src="$SOURCE_DIR/examples/quickstart.c"
export PKG_CONFIG_PATH="$LIB/pkgconfig"
unset PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR

pc() { pkg-config "$@" resil || fail "pkg-config $* resil failed"; }
text=$(pc --cflags); read -ra cflags <<<"$text"
text=$(pc --libs); read -ra libs <<<"$text"
text=$(pc --static --libs); read -ra static_libs <<<"$text"
read -ra link_flags <<<"$LINK_FLAGS"
note "pkg-config --cflags --libs resil: ${cflags[*]} ${libs[*]}"

pinned=()
for word in "${static_libs[@]}"; do
    if [[ "$word" == -lresil ]]; then
        pinned+=('-Wl,-Bstatic' -lresil '-Wl,-Bdynamic')
    else
        pinned+=("$word")
    fi
done

run "$CC" -std=c11 -Wall -Wextra -Werror "${cflags[@]}" "$src" -o "$dir/quickstart_shared" \
    "${libs[@]}" "${link_flags[@]}"
run "$CC" -std=c11 -Wall -Wextra -Werror "${cflags[@]}" "$src" -o "$dir/quickstart_static" \
    "${pinned[@]}" "${link_flags[@]}"

needs() { readelf -d "$1" | grep -F '(NEEDED)' | grep -o 'libresil[^]]*' || true; }
[[ "$(needs "$dir/quickstart_shared")" == "libresil.so.$ABI_resil" ]] ||
    fail "the shared build does not need libresil.so.$ABI_resil (NEEDED: $(needs "$dir/quickstart_shared"))"
[[ -z "$(needs "$dir/quickstart_static")" ]] ||
    fail "the static build still needs $(needs "$dir/quickstart_static")"

expect="succeeded after 3 attempts"
out=$(LD_LIBRARY_PATH="$LIB" "$dir/quickstart_shared") || fail "quickstart (shared) exited $?: $out"
[[ "$out" == "$expect" ]] || fail "quickstart (shared) printed '$out', expected '$expect'"
out=$(env -u LD_LIBRARY_PATH "$dir/quickstart_static") || fail "quickstart (static) exited $?: $out"
[[ "$out" == "$expect" ]] || fail "quickstart (static) printed '$out', expected '$expect'"
note "quickstart built with pkg-config runs, shared (NEEDED libresil.so.$ABI_resil) and static"
