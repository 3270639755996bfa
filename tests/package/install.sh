#!/usr/bin/env bash
# install.sh — package.install: install the current build into a temporary
# prefix and check the tree a packager or a user gets.
#
# It installs with `cmake --install --prefix`, not DESTDIR, because a
# relocated prefix is what a user of /opt or $HOME does, and it is the case
# where a generated file (resil.pc) can carry the wrong prefix; DESTDIR keeps
# the configured prefix by design. The other package.* tests use this tree
# (a CTest fixture), so it is also their setup. Adapters may add their own
# libraries and .pc files: only the core's files are required here.
. "$(dirname "$0")/lib.sh"

rm -rf "$PREFIX"
"$CMAKE_COMMAND" --install "$BUILD_DIR" --prefix "$PREFIX" >"$WORK/install.log" 2>&1 ||
    { cat "$WORK/install.log" >&2; fail "cmake --install $BUILD_DIR --prefix $PREFIX failed"; }

[[ "$LIBDIR" != /* && "$INCLUDEDIR" != /* ]] ||
    fail "CMAKE_INSTALL_LIBDIR/INCLUDEDIR are absolute ($LIBDIR, $INCLUDEDIR); the package tests need prefix-relative ones"

expect_file() { [[ -f "$1" ]] || fail "missing from the installed tree: ${1#"$PREFIX"/}"; }

# Headers: the umbrella and every public header of the source tree, but
# those of adapters this build left out (HEADERS_NOT_INSTALLED, e.g.
# "http.h;store.h"), which must then be absent.
expect_file "$INC/resil.h"
count=0
for h in "$SOURCE_DIR"/include/resil/*.h; do
    if [[ ";${HEADERS_NOT_INSTALLED:-};" == *";$(basename "$h");"* ]]; then
        [[ ! -e "$INC/resil/$(basename "$h")" ]] ||
            fail "resil/$(basename "$h") is installed, but its adapter was not built"
        continue
    fi
    expect_file "$INC/resil/$(basename "$h")"
    cmp -s "$h" "$INC/resil/$(basename "$h")" || fail "installed resil/$(basename "$h") differs from the source"
    count=$((count + 1))
done
note "headers: resil.h and $count under resil/"

# Libraries: the real file, the SONAME link, the development link, the archive.
real="$LIB/libresil.so.$VERSION"
expect_file "$real"
[[ -L "$LIB/libresil.so.$ABI_resil" ]] || fail "libresil.so.$ABI_resil is not a symlink"
[[ -L "$LIB/libresil.so" ]] || fail "libresil.so is not a symlink"
[[ "$(readlink -f "$LIB/libresil.so")" == "$(readlink -f "$real")" ]] ||
    fail "libresil.so does not lead to libresil.so.$VERSION"
expect_file "$LIB/libresil.a"

soname=$(readelf -d "$real" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ "$soname" == "libresil.so.$ABI_resil" ]] ||
    fail "libresil.so's SONAME is '$soname', expected libresil.so.$ABI_resil"
note "libraries: libresil.so.$VERSION (SONAME $soname), libresil.a"

# Each adapter this build made carries its own ABI number (CMakeLists.txt).
for name in resil-http resil-store resil-redis resil-config resil-uv; do
    file="$LIB/lib$name.so.$VERSION"
    [[ -e "$file" ]] || continue
    var="ABI_${name//-/_}"
    want="lib$name.so.${!var}"
    got=$(readelf -d "$file" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    [[ "$got" == "$want" ]] || fail "lib$name.so's SONAME is '$got', expected $want"
    [[ -L "$LIB/$want" ]] || fail "$want is not a symlink"
    note "libraries: lib$name.so.$VERSION (SONAME $got)"
done

# The archive is the same library: it defines what the shared one exports.
missing=$(comm -23 \
    <(nm -D --defined-only "$real" | awk '$2 ~ /^[TDRBW]$/ && $3 ~ /^resil_/ {print $3}' | sort -u) \
    <(nm --defined-only "$LIB/libresil.a" 2>/dev/null | awk '$2 ~ /^[TDRBW]$/ {print $3}' | sort -u))
[[ -z "$missing" ]] || fail "libresil.a lacks symbols the shared library exports: $missing"

# pkg-config: present, and pointing at this prefix rather than the configured one.
pc="$LIB/pkgconfig/resil.pc"
expect_file "$pc"
grep -qx "prefix=$PREFIX" "$pc" ||
    fail "resil.pc does not name the install prefix $PREFIX: $(grep '^prefix=' "$pc")"
pcver=$(PKG_CONFIG_PATH="$LIB/pkgconfig" pkg-config --modversion resil) ||
    fail "pkg-config cannot read resil.pc"
[[ "$pcver" == "$VERSION" ]] || fail "resil.pc says version $pcver, the project is $VERSION"

# The header's version macros agree with the project's version.
hdr=$(sed -n 's/^#define RESIL_VERSION_STRING "\(.*\)"/\1/p' "$INC/resil/common.h")
[[ "$hdr" == "$VERSION" ]] || fail "common.h says RESIL_VERSION_STRING \"$hdr\", the project is $VERSION"

# CMake package: config, version file, exported targets.
cm="$LIB/cmake/resil"
for f in resilConfig.cmake resilConfigVersion.cmake resilTargets.cmake; do
    expect_file "$cm/$f"
done
ls "$cm"/resilTargets-*.cmake >/dev/null 2>&1 || fail "no per-configuration resilTargets-*.cmake in $cm"
# They must not point back into the source or build tree (the prefix itself
# lives in the build tree here, so its own mentions are fine).
leaks=$(grep -hF -e "$SOURCE_DIR" -e "$BUILD_DIR" "$cm"/*.cmake "$pc" | grep -vF "$PREFIX" || true)
[[ -z "$leaks" ]] || fail "installed package files point into the source or build tree: $leaks"
note "pkg-config and CMake package files: version $VERSION"

touch "$PREFIX/.installed"
note "installed tree at $PREFIX is complete"
