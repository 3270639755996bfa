#!/usr/bin/env bash
# deps.sh — install the Debian packages resil needs to build and test, when
# they are missing (--bench: also those the gateway benchmark needs). As root it runs apt-get; otherwise it prints the exact
# apt-get line to run and exits 1, changing nothing. Every Makefile target
# calls it first, so `make demo` and `make check` work on a fresh machine.
set -euo pipefail

# clang and its sanitizer runtimes unversioned, so the two always match the
# distribution's default clang.
packages=(
  build-essential cmake pkg-config clang libclang-rt-dev
  libcmocka-dev
  libcurl4-openssl-dev curl
  libsqlite3-dev libpq-dev postgresql
  libhiredis-dev redis-server
  libjansson-dev
  libmicrohttpd-dev
  libuv1-dev
  prometheus
)

# Only for bench/gateway-vs-nginx.sh (make bench-gateway), never for make
# check: nginx as the upstream and the proxy to compare with, wrk to drive
# them, sqlite3 to fill a store with expired records for the purge run.
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(nginx-light wrk sqlite3)
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

line="apt-get install -y ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  echo "resil needs these Debian packages: ${missing[*]}" >&2
  echo "run as root:  apt-get update && $line" >&2
  exit 1
fi
echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# A mirror that stops answering fails the step after 30 s and three tries.
net=(-o Acquire::http::Timeout=30 -o Acquire::https::Timeout=30 -o Acquire::Retries=3)
apt-get update -qq "${net[@]}" </dev/null
# The postgresql package starts a cluster by default; the tests run their own.
apt-get install -y -qq --no-install-recommends "${net[@]}" "${missing[@]}" </dev/null
