#!/usr/bin/env bash
# debian-check.sh — build the Debian packages from this tree and try them as
# a new user would: `dpkg-buildpackage -us -uc -b` in a copy of the tree,
# lintian with no error allowed, then a fresh Debian root (mmdebstrap) with
# only a compiler and pkg-config in it, where `apt-get install ./*.deb`
# must bring everything else. Inside it: `resil --version`, the demo, a
# retried command and a retried request, the manual pages, and the README's
# library example compiled against the installed libresil-dev (plus a
# program using every adapter's header, so the -dev package's dependencies
# are checked too).
#
# Root is needed (chroot). It reads nothing from standard input and needs
# no terminal, so CI runs it as it is. It takes about 4 minutes on two
# busy cores (the package build half of it), and it cannot hang: every
# step has a time limit (bounded below), and apt gives up on a silent
# mirror after 30 s and three tries. Leaves the .deb files in build-deb/ (or
# $RESIL_DEB_OUT).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
cd "$(dirname "$0")/.."
src=$PWD
out=${RESIL_DEB_OUT:-$src/build-deb}
suite=$(. /etc/os-release && echo "$VERSION_CODENAME")

say() { echo "debian-check: $*"; }
fail() { echo "debian-check: FAILED: $*" >&2; exit 1; }
# A step that may take at most $1 (then TERM, and KILL 30 s later).
bounded() { local limit=$1; shift; timeout --kill-after=30s "$limit" "$@"; }
# apt: a mirror that stops answering fails the step instead of holding it.
apt_net=(-o Acquire::http::Timeout=30 -o Acquire::https::Timeout=30 -o Acquire::Retries=3)

[[ $(id -u) -eq 0 ]] || fail "run as root (it builds a chroot)"
scripts/deps.sh
need=()
for p in debhelper lintian mmdebstrap fakeroot; do
  [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" == "install ok installed" ]] ||
    need+=("$p")
done
if [[ ${#need[@]} -gt 0 ]]; then
  say "installing ${need[*]}"
  bounded 10m apt-get install -y -qq --no-install-recommends "${apt_net[@]}" "${need[@]}" \
    </dev/null >/dev/null
fi

work=$(mktemp -d /tmp/resil-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT

# A copy of the tree as git sees it (tracked and new files, not build trees).
mkdir "$work/resil"
git ls-files -co --exclude-standard -z | tar --null -cf - -T - | tar -xf - -C "$work/resil"
say "dpkg-buildpackage -us -uc -b"
(cd "$work/resil" && bounded 30m dpkg-buildpackage -us -uc -b -j2 </dev/null >"$work/build.log" 2>&1) ||
  { tail -40 "$work/build.log" >&2; fail "dpkg-buildpackage"; }
grep -h "dpkg-gensymbols: warning" "$work/build.log" || true

say "lintian"
bounded 10m lintian --fail-on error --tag-display-limit 0 "$work"/resil_*.changes </dev/null ||
  fail "lintian reports errors"

rm -rf "$out" && mkdir -p "$out"
cp "$work"/*.deb "$out"/
rm -f "$out"/*-dbgsym_*.deb
debs=$(cd "$out" && ls *.deb | tr '\n' ' ')
say "packages: $debs"

# What runs inside the new root, as its root user, from /root.
cat >"$work/try.sh" <<'TRY'
set -eu
cd /root
fail() { echo "debian-check (in the new root): FAILED: $*" >&2; exit 1; }
resil --version
resil --version | grep -q "^resil $1" || fail "resil --version does not say $1"
resil demo retry-pattern >demo.out || fail "resil demo retry-pattern exited $?"
grep -q . demo.out || fail "the demo printed nothing"
resil run --attempts 3 --delay 10ms -- sh -c 'test "$RESIL_ATTEMPT" = 3' ||
  fail "resil run did not retry to the third attempt"
set +e
resil http --attempts 2 --delay 10ms http://127.0.0.1:9/ 2>http.err
rc=$?
set -e
[ "$rc" = 7 ] || fail "resil http on a closed port exited $rc, expected 7"
grep -q "after 2 attempts" http.err || { cat http.err; fail "resil http did not retry"; }
for page in man1/resil.1 man1/resil-http.1 man3/resil.3; do
  [ -e /usr/share/man/$page.gz ] || fail "no manual page $page"
done
cc -Wall -Werror -o quickstart /root/quickstart.c $(pkg-config --cflags --libs resil)
./quickstart | grep -qx "succeeded after 3 attempts" || fail "the README's example"
cat >all.c <<'C'
#include <resil.h>
#include <resil/config.h>
#include <resil/http.h>
#include <resil/otlp.h>
#include <resil/redis.h>
#include <resil/store.h>
#include <resil/uv.h>
int main(void) { return resil_strerror(0) == 0; }
C
cc -Wall -Werror -o all all.c \
  $(pkg-config --cflags --libs resil resil-http resil-store resil-redis resil-config resil-uv resil-otlp)
./all || fail "a program linking every adapter"
echo "debian-check (in the new root): ok"
TRY
cp examples/quickstart.c "$work/quickstart.c"

say "a fresh $suite root with only gcc and pkg-config, then apt-get install ./*.deb"
bounded 20m mmdebstrap --quiet --variant=apt --include=gcc,libc6-dev,pkg-config \
  --aptopt='Acquire::http::Timeout "30"' --aptopt='Acquire::https::Timeout "30"' \
  --aptopt='Acquire::Retries "3"' \
  --customize-hook="mkdir -p \"\$1/root/debs\"" \
  --customize-hook="copy-in $(cd "$out" && printf "$out/%s " *.deb) /root/debs" \
  --customize-hook="copy-in $work/try.sh $work/quickstart.c /root" \
  --customize-hook="chroot \"\$1\" sh -c 'cd /root/debs && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ./*.deb' >$work/apt.log 2>&1 || { tail -30 $work/apt.log; exit 1; }" \
  --customize-hook="chroot \"\$1\" sh /root/try.sh $(sed -n 's/^project(resil VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)" \
  "$suite" /dev/null </dev/null || fail "installing or using the packages in a fresh root"
say "ok: $debs"
