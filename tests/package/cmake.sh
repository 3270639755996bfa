#!/usr/bin/env bash
# cmake.sh — package.cmake: a separate CMake project (consumer/) finds the
# installed package with find_package(resil) and links resil::resil and
# resil::resil_static; both programs must build and run.
#
# The consumer is configured with the build's own compiler and generator, and
# with its sanitizer link flags in the ASan/TSan builds, whose libraries need
# the sanitizer runtime in every program that links them.
. "$(dirname "$0")/lib.sh"
need_installed

dir=$(scratch cmake)
cmake_consumer consumer "$dir" -DEXPECTED_VERSION="$VERSION"
found=$(sed -n 's/^resil_DIR:PATH=//p' "$dir/CMakeCache.txt")
[[ "$found" == "$LIB/cmake/resil" ]] || fail "find_package(resil) found $found, not the installed $LIB/cmake/resil"

check_pair consumer "$dir" "resil $VERSION: succeeded after 3 attempts" "libresil.so.$ABI_resil"
note "find_package(resil $VERSION): resil::resil and resil::resil_static build and run"
