#!/usr/bin/env bash
# symbols.sh — package.symbols: every installed resil shared library exports
# only its public API.
#
# The build compiles with hidden visibility and marks public functions
# RESIL_API, so the dynamic symbol table is the API: a resil__ internal or an
# unprefixed helper there is a symbol users can link against by accident and
# that we could then never change. Adapter libraries (libresil-*.so) are held
# to the same rule. Symbols the linker itself defines are allowed.
. "$(dirname "$0")/lib.sh"
need_installed

allowed_linker='^(_init|_fini|_edata|_end|__bss_start|_DYNAMIC|_GLOBAL_OFFSET_TABLE_)$'

checked=0
for so in "$LIB"/libresil*.so.*.*; do
    [[ -f "$so" && ! -L "$so" ]] || continue
    syms=$(nm -D --defined-only "$so" | awk '{print $NF}' | sort -u)
    public=$(grep -c '^resil_' <<<"$syms" || true)
    [[ "$public" -gt 0 ]] || fail "$(basename "$so") exports no resil_* symbol at all"
    bad=$(grep -v '^resil_' <<<"$syms" | grep -Ev "$allowed_linker" || true)
    internal=$(grep '^resil__' <<<"$syms" || true)
    [[ -z "$internal" ]] || fail "$(basename "$so") exports internal symbols: $(oneline "$internal")"
    [[ -z "$bad" ]] || fail "$(basename "$so") exports symbols without the resil_ prefix: $(oneline "$bad")"
    note "$(basename "$so"): $public resil_* symbols, nothing else"
    checked=$((checked + 1))
done
[[ "$checked" -gt 0 ]] || fail "no libresil*.so.X.Y in $LIB"
