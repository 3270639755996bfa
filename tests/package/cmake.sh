#!/usr/bin/env bash
# cmake.sh — package.cmake: a separate CMake project (consumer/) finds the
# installed package with find_package(resil) and links resil::resil and
# resil::resil_static; both programs must build and run.
#
# The consumer is configured with the build's own compiler and generator, and
# with its sanitizer link flags in the ASan/TSan builds, whose libraries need
# the sanitizer runtime in every program that links them.
. "$(dirname "$0")/lib.sh"
need_installed

dir=$(scratch cmake)
args=(-S "$SOURCE_DIR/tests/package/consumer" -B "$dir"
      -G "$CMAKE_GENERATOR" -DCMAKE_C_COMPILER="$CC"
      -DCMAKE_PREFIX_PATH="$PREFIX" -DEXPECTED_VERSION="$VERSION"
      -DCMAKE_EXE_LINKER_FLAGS="$LINK_FLAGS" -DCMAKE_BUILD_TYPE=Debug)
[[ -z "$MAKE_PROGRAM" ]] || args+=(-DCMAKE_MAKE_PROGRAM="$MAKE_PROGRAM")
# Only the prefix may supply the package: no user or system package registry.
args+=(-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)

echo "+ $CMAKE_COMMAND ${args[*]}"
"$CMAKE_COMMAND" "${args[@]}" >"$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log" >&2; fail "configuring the consumer failed"; }
found=$(sed -n 's/^resil_DIR:PATH=//p' "$dir/CMakeCache.txt")
[[ "$found" == "$LIB/cmake/resil" ]] || fail "find_package(resil) found $found, not the installed $LIB/cmake/resil"
run "$CMAKE_COMMAND" --build "$dir"

expect="resil $VERSION: succeeded after 3 attempts"
for kind in shared static; do
    out=$(env -u LD_LIBRARY_PATH "$dir/consumer_$kind") || fail "consumer_$kind exited $?: $out"
    [[ "$out" == "$expect" ]] || fail "consumer_$kind printed '$out', expected '$expect'"
done
readelf -d "$dir/consumer_shared" | grep -q "NEEDED.*libresil.so.$ABI_resil" ||
    fail "consumer_shared is not linked against libresil.so.$ABI_resil"
if readelf -d "$dir/consumer_static" | grep -q 'NEEDED.*libresil'; then
    fail "consumer_static needs a shared libresil"
fi
note "find_package(resil $VERSION): resil::resil and resil::resil_static build and run"
