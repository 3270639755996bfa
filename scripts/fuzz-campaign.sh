#!/bin/sh
# fuzz-campaign.sh — build every libFuzzer target and run each, one after
# the other, for a fixed number of executions on a temporary copy of its
# seed corpus; write what each run did as a markdown table.
#
# The targets are found, not listed: every fuzz_* target CMake knows
# (resil_add_fuzzers registers them from any folder), so a target added
# anywhere in the tree is in the next campaign without touching this file.
# Runs are sequential, one libFuzzer process at a time on one core, so a
# campaign can share a machine. The corpus copy keeps the committed seeds
# as they are (replay in `make check` depends on them); whatever a run
# finds — crash-*, leak-*, timeout-*, oom-* — is kept under the findings
# directory, to be turned into a fix and a corpus file.
#
# usage: scripts/fuzz-campaign.sh [-b BUILD_DIR] [-r RUNS] [-o TABLE.md]
#                                 [-t REGEX] [-n]
#   -b  build directory (default build-fuzz, as `make fuzz`)
#   -r  executions per target (default 10000000)
#   -o  where the markdown table goes (default BUILD_DIR/fuzz-campaign.md)
#   -t  only the targets whose name (fuzz_NAME) matches this extended regex
#   -n  do not configure or build; run the binaries already in BUILD_DIR
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=build-fuzz
RUNS=10000000
OUT=
ONLY=.
NOBUILD=0
JOBS=${JOBS:-2}

while getopts b:r:o:t:n opt; do
    case $opt in
    b) BUILD=$OPTARG ;;
    r) RUNS=$OPTARG ;;
    o) OUT=$OPTARG ;;
    t) ONLY=$OPTARG ;;
    n) NOBUILD=1 ;;
    *) sed -n '15,21p' "$0" >&2; exit 2 ;;
    esac
done
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
OUT=${OUT:-$BUILD/fuzz-campaign.md}
FINDINGS=$BUILD/fuzz-findings
WORK=$(mktemp -d "${TMPDIR:-/tmp}/resil-fuzz.XXXXXX")
CHILD=
trap 'rm -rf "$WORK"' EXIT
trap '[ -z "$CHILD" ] || kill "$CHILD" 2>/dev/null; exit 130' INT TERM HUP

say() { printf '%s\n' "$*" >&2; }

# ---- build ------------------------------------------------------------------

configure() {
    CC=clang cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DRESIL_FUZZ=ON \
        -DRESIL_BUILD_BENCH=OFF >"$WORK/configure.log" 2>&1 || {
        cat "$WORK/configure.log" >&2
        say "fuzz-campaign: configuring $BUILD failed"
        exit 1
    }
}

# Every fuzz_* target of the build, by name (the Makefile generator's list).
targets() {
    cmake --build "$BUILD" --target help 2>/dev/null |
        sed -n 's/^\.\.\. \(fuzz_[A-Za-z0-9_]*\).*/\1/p' | grep -E "$ONLY" | sort -u
}

# One target at a time, so that one that does not build (work in progress
# elsewhere in the tree) costs only its own row.
build() {
    cmake --build "$BUILD" -j"$JOBS" --target "$1" >"$WORK/build-$1.log" 2>&1
}

binary() {
    find "$BUILD" -type f -name "$1" -perm -u+x 2>/dev/null | head -n 1
}

# ---- one run ------------------------------------------------------------------

# The first line of the target's design comment, after its name: what it drives.
drives() {
    src=$(find "$ROOT/tests" "$ROOT/src" -name "$1.c" 2>/dev/null | head -n 1)
    [ -n "$src" ] || { echo "?"; return; }
    awk 'function sentence_end(t,    i, c, depth) {
        depth = 0
        for (i = 1; i <= length(t); i++) {
            c = substr(t, i, 1)
            if (c == "(") depth++
            else if (c == ")" && depth > 0) depth--
            else if (depth == 0 && index(".:;", c) && (i == length(t) || substr(t, i + 1, 1) == " "))
                return i
        }
        return 0
    }
    NR >= 2 {
        sub(/^ \* ?/, ""); s = s (s == "" ? "" : " ") $0
        end = sentence_end(s)
        if (end || NR > 8) { if (end) s = substr(s, 1, end - 1); exit }
    } END { sub(/^[^ ]* — /, "", s); gsub(/\|/, "\\|", s); print s }' "$src"
}

# "1234567" -> "1,234,567"
commas() { printf '%s' "$1" | sed -e ':a' -e 's/\([0-9]\)\([0-9]\{3\}\)\($\|,\)/\1,\2\3/;ta'; }

# Seconds, as docs/fuzzing.md's table gives them.
clock() { printf '%d s' "$1"; }

row() { printf '| %s | %s | %s | %s | %s | %s |\n' "$@" >>"$WORK/rows"; }

run() {
    name=$1 bin=$2 short=${1#fuzz_}
    corpus=$WORK/corpus-$short
    artifacts=$WORK/artifacts-$short/
    mkdir -p "$corpus" "$artifacts"
    seeds=$ROOT/tests/fuzz/corpus/$short
    [ -d "$seeds" ] && cp -R "$seeds/." "$corpus/"
    log=$WORK/$short.log
    say "fuzz-campaign: $name, $RUNS executions from $(ls "$corpus" | wc -l) seeds"
    start=$(date +%s)
    # In the background and waited for, so that stopping the campaign
    # (Ctrl-C, kill) stops the fuzzer it is running too.
    set +e
    (cd "$WORK" && ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
        exec "$bin" -runs="$RUNS" -print_final_stats=1 -rss_limit_mb=2048 -timeout=30 \
        -artifact_prefix="$artifacts" "$corpus") >"$log" 2>&1 &
    CHILD=$!
    wait "$CHILD"
    status=$?
    CHILD=
    set -e
    secs=$(($(date +%s) - start))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
    found=$(ls "$artifacts" 2>/dev/null | wc -l)
    if [ "$status" -eq 0 ] && [ "$found" -eq 0 ]; then
        findings=none
    else
        mkdir -p "$FINDINGS/$short"
        cp "$log" "$FINDINGS/$short/"
        [ "$found" -eq 0 ] || cp "$artifacts"* "$FINDINGS/$short/"
        kinds=$(ls "$artifacts" 2>/dev/null | sed 's/-.*//' | sort | uniq -c |
            awk '{printf "%s%d %s", NR > 1 ? ", " : "", $1, $2}')
        findings="exit $status${kinds:+: $kinds} (see fuzz-findings/$short)"
    fi
    row "\`$name\`" "$(drives "$name")" "$(commas "${execs:-0}")" "$(clock "$secs")" \
        "${cov:-?}" "$findings"
    say "fuzz-campaign: $name: ${execs:-0} executions in $(clock "$secs"), cov ${cov:-?}, findings: $findings"
}

# ---- the campaign -------------------------------------------------------------

if [ "$NOBUILD" -eq 0 ]; then
    configure
fi
: >"$WORK/rows"
names=$(targets)
[ -n "$names" ] || { say "fuzz-campaign: no fuzz_* targets in $BUILD"; exit 1; }
for name in $names; do
    if [ "$NOBUILD" -eq 0 ] && ! build "$name"; then
        mkdir -p "$FINDINGS"
        cp "$WORK/build-$name.log" "$FINDINGS/"
        row "\`$name\`" "$(drives "$name")" "-" "-" "-" "did not build (see fuzz-findings/build-$name.log)"
        say "fuzz-campaign: $name did not build"
        continue
    fi
    bin=$(binary "$name")
    if [ -z "$bin" ]; then
        row "\`$name\`" "$(drives "$name")" "-" "-" "-" "no binary in $BUILD"
        continue
    fi
    run "$name" "$bin"
done

{
    echo "Campaign of $(date -u +%Y-%m-%d), $(commas "$RUNS") executions per target, $(clang --version | head -n 1)."
    echo
    echo "| Target | Drives | Executions | Wall time | cov | Findings |"
    echo "|---|---|---:|---:|---:|---|"
    cat "$WORK/rows"
} >"$OUT"
cat "$OUT"
# Nonzero when any target found something or could not run.
! grep -vq '| none |$' "$WORK/rows"
