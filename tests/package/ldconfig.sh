#!/usr/bin/env bash
# ldconfig.sh — package.ldconfig: when `make install` refreshes the
# loader's cache. cmake/ldconfig.cmake (the install's last step) runs
# ldconfig for a system prefix (/usr, /usr/local) as root, and never for
# another prefix, a staged install (DESTDIR) or another user. A stand-in
# ldconfig that leaves a mark, and a stand-in user id, let every case run
# without root.
. "$(dirname "$0")/lib.sh"

dir=$(scratch ldconfig)
fake="$dir/ldconfig"
printf '#!/bin/sh\necho ran >> "%s/marks"\n' "$dir" >"$fake"
chmod +x "$fake"

# case PREFIX UID DESTDIR EXPECTED-MARKS
case_() {
    rm -f "$dir/marks"
    env DESTDIR="$3" "$CMAKE_COMMAND" -DCMAKE_INSTALL_PREFIX="$1" -DRESIL_UID="$2" \
        -DRESIL_LDCONFIG="$fake" -P "$SOURCE_DIR/cmake/ldconfig.cmake" >/dev/null ||
        fail "cmake/ldconfig.cmake failed for prefix $1, uid $2, DESTDIR '$3'"
    local got=0
    [[ ! -f "$dir/marks" ]] || got=$(wc -l <"$dir/marks")
    [[ "$got" == "$4" ]] ||
        fail "prefix $1, uid $2, DESTDIR '$3': ldconfig ran $got times, expected $4"
}
case_ /usr/local 0 "" 1
case_ /usr 0 "" 1
case_ /usr/local/ 0 "" 1
case_ /opt/resil 0 "" 0
case_ /usr/local/stow 0 "" 0
case_ /usr/local 1000 "" 0
case_ /usr 0 "$dir/stage" 0
note "ldconfig runs for /usr and /usr/local as root only, never staged"
