#!/usr/bin/env bash
# vs-aws.sh AWS_PREFIX [ROUNDS] [MS] — one retry through a real event loop:
# resil on libuv beside aws-c-io on its epoll loop, in one process
# (vs_aws.c). AWS_PREFIX is an installation of aws-c-common, aws-c-cal and
# aws-c-io (include/ and lib/*.a), built Release from their sources as any
# CMake project is; nothing is fetched here. Builds resil Release in
# build-bench (as `make bench` does), links the harness, prints its
# interleaved timing (ROUNDS rounds, default 15, of about MS ms per
# operation, default 40) and each side's instructions per operation
# (callgrind, from two run lengths; aws-c-io's loop runs on a thread of its
# own, which callgrind serialises, so its figure moves by a few per cent
# between runs).
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 AWS_PREFIX [ROUNDS] [MS]" >&2; exit 2
fi
AWS=$(cd "$1" && pwd)
ROUNDS=${2:-15}
MS=${3:-40}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
B=$ROOT/build-bench
JOBS=${JOBS:-2}
cmake -S "$ROOT" -B "$B" -DCMAKE_BUILD_TYPE=Release -DRESIL_BUILD_TESTS=OFF >/dev/null
cmake --build "$B" -j"$JOBS" --target resil_static resil_uv_static >/dev/null
gcc -O3 -DNDEBUG -std=gnu11 -Wall -Wextra -Werror -I"$ROOT/include" -isystem "$AWS/include" \
  "$HERE/vs_aws.c" -o "$B/vs_aws" \
  "$B/src/uv/libresil-uv.a" "$B/libresil.a" \
  "$AWS/lib/libaws-c-io.a" "$AWS/lib/libaws-c-cal.a" "$AWS/lib/libaws-c-common.a" \
  $(pkg-config --libs libuv) -lpthread -lm -ldl
"$B/vs_aws" time "$ROUNDS" "$MS"
if command -v valgrind >/dev/null; then
  for op in resil/retry_1fail uv/idle_pass aws/retry_1fail.zero aws/retry_1fail.devzero; do
    ir() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$B/vs_aws" run "$op" "$1" 2>&1 |
           awk '/Collected/{print $4}'; }
    a=$(ir 5000); b=$(ir 55000)
    echo "instructions $op per_op=$(( (b - a) / 50000 ))"
  done
fi
