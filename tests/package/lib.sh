# shellcheck shell=bash disable=SC2034
# lib.sh — what every packaging test shares, sourced by each script.
#
# The tests play a downstream user: they look only at the installed tree (a
# prefix inside the build directory that package.install fills), never at the
# source tree's internals. The build's facts — compiler, sanitizer link flags,
# install layout — arrive in one generated file, package.env, passed as the
# first argument, so every script can also be run by hand:
#   bash tests/package/pkgconfig.sh BUILD/tests/package/package.env

set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }   # CTest's SKIP_RETURN_CODE
note() { echo "-- $*"; }

[[ $# -ge 1 && -r "$1" ]] || fail "usage: $0 BUILD/tests/package/package.env"
# shellcheck source=/dev/null
. "$1"
shift

LIB="$PREFIX/$LIBDIR"
INC="$PREFIX/$INCLUDEDIR"

# A fresh scratch directory per test, kept after a failure for inspection.
scratch() {
    local dir="$WORK/$1"
    rm -rf "$dir" && mkdir -p "$dir" && echo "$dir"
}

need_installed() {
    [[ -f "$PREFIX/.installed" ]] ||
        fail "no installed tree at $PREFIX: run package.install first (ctest -R 'package\\.')"
}

# Run a command, showing it; on failure show why and stop.
run() {
    echo "+ $*"
    "$@" || fail "command failed (exit $?): $*"
}

# Join a command's output lines into one line, for messages.
oneline() { tr '\n' ' ' <<<"$1" | sed 's/ *$//'; }

# ADAPTER_CFLAGS: the compile flags the installed adapters' .pc files give
# (an adapter's public header may include its dependency's, e.g. curl.h).
adapter_cflags() {
    local pc name text words
    ADAPTER_CFLAGS=()
    for pc in "$LIB"/pkgconfig/resil-*.pc; do
        [[ -f "$pc" ]] || continue
        name=$(basename "$pc" .pc)
        text=$(PKG_CONFIG_PATH="$LIB/pkgconfig" pkg-config --cflags "$name") ||
            fail "pkg-config --cflags $name failed"
        read -ra words <<<"$text"
        ADAPTER_CFLAGS+=("${words[@]}")
    done
}
