#!/usr/bin/env bash
# adapters.sh — package.adapters: a separate CMake project (adapters/) asks
# find_package(resil COMPONENTS ...) for every adapter this build installed
# and links each one's exported targets, resil::<name> and
# resil::<name>_static; every program must build and print its line.
. "$(dirname "$0")/lib.sh"
need_installed
[[ -n "$ADAPTERS" ]] || skip "this build installed no adapter"

dir=$(scratch adapters)
cmake_consumer adapters "$dir" "-DADAPTERS=$ADAPTERS"

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
    check_pair "$a" "$dir" "${expect[$a]}" "libresil-$a.so"
done
note "find_package(resil COMPONENTS ${ADAPTERS//;/ }): each resil::<adapter> and _static builds and runs"
