#!/usr/bin/env bash
# deps.sh — package.deps: scripts/deps.sh, which every Makefile target runs
# first, changes nothing unless it is root. Run as an unprivileged user with
# packages missing, it must print the exact apt-get line and fail; with
# nothing missing it must say nothing and succeed; as root it must install
# exactly the missing packages.
#
# The machine's package state is faked: a dpkg-query in PATH reports the
# packages named in FAKE_MISSING as absent, and an apt-get in PATH only
# records its arguments, so the test never touches the real system. When the
# suite runs as root (CI), the unprivileged cases drop to nobody with setpriv
# or runuser; "root" for the last case is a fake `id`.
. "$(dirname "$0")/lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin" "$tmp/rootbin"
cp "$SOURCE_DIR/scripts/deps.sh" "$tmp/deps.sh"
cat >"$tmp/bin/dpkg-query" <<'SH'
#!/bin/sh
for pkg; do :; done
for m in $FAKE_MISSING; do
    if [ "$m" = "$pkg" ]; then
        echo "dpkg-query: no packages found matching $pkg" >&2
        exit 1
    fi
done
printf 'install ok installed'
SH
cat >"$tmp/bin/apt-get" <<'SH'
#!/bin/sh
echo "apt-get $*" >>"$APT_LOG"
SH
cat >"$tmp/rootbin/id" <<'SH'
#!/bin/sh
if [ "$1" = -u ]; then echo 0; else exec /usr/bin/id "$@"; fi
SH
touch "$tmp/apt.log"
chmod 755 "$tmp" "$tmp/bin" "$tmp/rootbin" "$tmp"/bin/* "$tmp/rootbin/id" "$tmp/deps.sh"
chmod 666 "$tmp/apt.log"
cd "$tmp"

unprivileged=()
if [[ $(id -u) -eq 0 ]]; then
    if command -v setpriv >/dev/null; then
        unprivileged=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups --)
    elif command -v runuser >/dev/null; then
        unprivileged=(runuser -u nobody --)
    else
        skip "running as root, and neither setpriv nor runuser is there to become nobody"
    fi
fi

# deps PATH_PREFIX MISSING [ARGS]: run the copy of deps.sh; status in
# $status, output in $tmp/out and $tmp/err.
deps() {
    : >"$tmp/apt.log"
    status=0
    "${unprivileged[@]}" env -i PATH="$1:/usr/bin:/bin" FAKE_MISSING="$2" APT_LOG="$tmp/apt.log" \
        bash "$tmp/deps.sh" "${@:3}" >"$tmp/out" 2>"$tmp/err" || status=$?
}

deps "$tmp/bin" "cmake libcmocka-dev"
[[ $status -ne 0 ]] || fail "unprivileged with packages missing: exit 0, expected a failure"
grep -qx '.*apt-get install -y cmake libcmocka-dev' "$tmp/err" ||
    fail "unprivileged: no exact 'apt-get install -y cmake libcmocka-dev' line on stderr: $(cat "$tmp/err")"
[[ ! -s "$tmp/apt.log" ]] || fail "unprivileged: apt-get was run: $(cat "$tmp/apt.log")"
note "unprivileged, two missing: exit $status, $(grep 'apt-get install' "$tmp/err")"

deps "$tmp/bin" ""
[[ $status -eq 0 ]] || fail "unprivileged with nothing missing: exit $status: $(cat "$tmp/err")"
[[ ! -s "$tmp/out" && ! -s "$tmp/err" ]] || fail "nothing missing, yet it printed: $(cat "$tmp/out" "$tmp/err")"
[[ ! -s "$tmp/apt.log" ]] || fail "nothing missing, yet apt-get was run: $(cat "$tmp/apt.log")"
note "nothing missing: exit 0, silent"

deps "$tmp/rootbin:$tmp/bin" "cmake libcmocka-dev"
[[ $status -eq 0 ]] || fail "as root: exit $status: $(cat "$tmp/err")"
net='-o Acquire::http::Timeout=30 -o Acquire::https::Timeout=30 -o Acquire::Retries=3'
expect="apt-get update -qq $net"$'\n'"apt-get install -y -qq --no-install-recommends $net cmake libcmocka-dev"
[[ "$(cat "$tmp/apt.log")" == "$expect" ]] ||
    fail "as root, apt-get ran as: $(cat "$tmp/apt.log"); expected: $expect"
note "root, two missing: apt-get update, then install of exactly those two, each with network time limits"

# The gateway benchmark's packages are asked for only with --bench.
deps "$tmp/bin" "nginx-light wrk"
[[ $status -eq 0 ]] || fail "without --bench, missing nginx-light and wrk failed: $(cat "$tmp/err")"
deps "$tmp/bin" "nginx-light wrk" --bench
[[ $status -ne 0 ]] || fail "--bench with nginx-light and wrk missing: exit 0, expected a failure"
grep -qx '.*apt-get install -y nginx-light wrk' "$tmp/err" ||
    fail "--bench: no exact 'apt-get install -y nginx-light wrk' line on stderr: $(cat "$tmp/err")"
note "the benchmark's nginx-light and wrk: needed with --bench only"
