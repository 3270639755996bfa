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

# Configure and build the CMake project tests/package/$1 in $2 the way a
# user would: the build's compiler, generator and sanitizer link flags,
# CMAKE_PREFIX_PATH at the installed tree and no package registry, so only
# the prefix may supply the package; further arguments go to the configure.
cmake_consumer() {
    local project=$1 dir=$2
    shift 2
    local args=(-S "$SOURCE_DIR/tests/package/$project" -B "$dir"
                -G "$CMAKE_GENERATOR" -DCMAKE_C_COMPILER="$CC"
                -DCMAKE_PREFIX_PATH="$PREFIX"
                -DCMAKE_EXE_LINKER_FLAGS="$LINK_FLAGS" -DCMAKE_BUILD_TYPE=Debug
                -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
                -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF "$@")
    [[ -z "$MAKE_PROGRAM" ]] || args+=(-DCMAKE_MAKE_PROGRAM="$MAKE_PROGRAM")
    echo "+ $CMAKE_COMMAND ${args[*]}"
    "$CMAKE_COMMAND" "${args[@]}" >"$dir/configure.log" 2>&1 ||
        { cat "$dir/configure.log" >&2; fail "configuring tests/package/$project failed"; }
    run "$CMAKE_COMMAND" --build "$dir"
}

# The pair a consumer project builds, $1_shared and $1_static in $2: both
# print $3 with no LD_LIBRARY_PATH (the shared one finds its libraries by
# the rpath CMake gave it, and they find theirs), the shared one needs the
# library $4 ("libresil.so.0"), the static one no shared libresil at all.
check_pair() {
    local name=$1 dir=$2 expect=$3 needed=$4 kind out
    for kind in shared static; do
        out=$(env -u LD_LIBRARY_PATH "$dir/${name}_$kind") || fail "${name}_$kind exited $?: $out"
        [[ "$out" == "$expect" ]] || fail "${name}_$kind printed '$out', expected '$expect'"
    done
    readelf -d "$dir/${name}_shared" | grep -q "NEEDED.*$needed" ||
        fail "${name}_shared is not linked against $needed"
    if readelf -d "$dir/${name}_static" | grep -q 'NEEDED.*libresil'; then
        fail "${name}_static needs a shared libresil library"
    fi
}
