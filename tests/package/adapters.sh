#!/usr/bin/env bash
# adapters.sh — package.adapters: a separate CMake project (adapters/) asks
# find_package(resil COMPONENTS ...) for every adapter this build installed
# and links each one's exported targets, resil::<name> and
# resil::<name>_static; every program must build and print its line.
. "$(dirname "$0")/lib.sh"
need_installed
[[ -n "$ADAPTERS" ]] || skip "this build installed no adapter"

dir=$(scratch adapters)
args=(-S "$SOURCE_DIR/tests/package/adapters" -B "$dir"
      -G "$CMAKE_GENERATOR" -DCMAKE_C_COMPILER="$CC"
      -DCMAKE_PREFIX_PATH="$PREFIX" "-DADAPTERS=$ADAPTERS"
      -DCMAKE_EXE_LINKER_FLAGS="$LINK_FLAGS" -DCMAKE_BUILD_TYPE=Debug
      -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
[[ -z "$MAKE_PROGRAM" ]] || args+=(-DCMAKE_MAKE_PROGRAM="$MAKE_PROGRAM")
echo "+ $CMAKE_COMMAND ${args[*]}"
"$CMAKE_COMMAND" "${args[@]}" >"$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log" >&2; fail "configuring the adapter consumer failed"; }
run "$CMAKE_COMMAND" --build "$dir"

declare -A expect=(
    [http]="http: POST sent once"
    [store]="store: sha256(abc) ba7816bf"
    [redis]="redis: a missing url is refused"
    [config]="config: 1 retry policy"
    [uv]="uv: a loop"
    [otlp]="otlp: a URL without a scheme is refused"
)
IFS=';' read -r -a adapters <<<"$ADAPTERS"
for a in "${adapters[@]}"; do
    [[ -n "${expect[$a]:-}" ]] || fail "no expected line for adapter '$a': add it here"
    for kind in shared static; do
        out=$(env -u LD_LIBRARY_PATH "$dir/${a}_$kind") || fail "${a}_$kind exited $?: $out"
        [[ "$out" == "${expect[$a]}" ]] || fail "${a}_$kind printed '$out', expected '${expect[$a]}'"
    done
    readelf -d "$dir/${a}_shared" | grep -q "NEEDED.*libresil-$a.so" ||
        fail "${a}_shared is not linked against libresil-$a.so"
    if readelf -d "$dir/${a}_static" | grep -q 'NEEDED.*libresil'; then
        fail "${a}_static needs a shared libresil library"
    fi
done
note "find_package(resil COMPONENTS ${ADAPTERS//;/ }): each resil::<adapter> and _static builds and runs"
