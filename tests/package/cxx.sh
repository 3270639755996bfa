#!/usr/bin/env bash
# cxx.sh — package.cxx: resil is usable from C++. Every installed public
# header (and the umbrella) compiles alone as C++ with warnings as errors;
# every function each installed library exports is declared, with C linkage,
# by those headers; and a C++ program calling the library builds against the
# installed tree (pkg-config, shared library) and runs.
#
# The C++ compiler is the one that matches the build's C compiler (g++ for
# gcc, clang++ for clang), so the sanitizer builds link one runtime.
. "$(dirname "$0")/lib.sh"
need_installed

[[ -n "$CXX" ]] || fail "no C++ compiler matching $CC was found (g++ comes with build-essential, clang++ with clang; see scripts/deps.sh)"
dir=$(scratch cxx)
cxxflags=(-std=c++11 -Wall -Wextra -Werror -pedantic -I"$INC")

# Headers of adapters may include their dependency's headers; the installed
# .pc files say where those are.
adapter_cflags
read -ra link_flags <<<"$LINK_FLAGS"

headers=("$INC/resil.h" "$INC"/resil/*.h)
for h in "${headers[@]}"; do
    rel=${h#"$INC"/}
    printf '#include <%s>\n#include <%s>\n' "$rel" "$rel" >"$dir/tu.cpp"
    "$CXX" -x c++ -fsyntax-only "${cxxflags[@]}" "${ADAPTER_CFLAGS[@]}" "$dir/tu.cpp" ||
        fail "<$rel> does not compile as C++ on its own ($CXX ${cxxflags[*]})"
done
note "${#headers[@]} headers compile alone as C++11 ($CXX -Wall -Wextra -Werror -pedantic)"

# Every function a library exports must be declared in an installed header
# with C linkage: a C++ file taking the address of each one must compile (it
# is declared) and link (the guards made it extern "C", so the reference is
# to the C name, not a mangled one).
includes=$(printf '#include <%s>\n' "${headers[@]#"$INC"/}")
for so in "$LIB"/libresil*.so; do
    lib=$(basename "$so" .so)
    lib=${lib#lib}
    mapfile -t exports < <(nm -D --defined-only "$so" | awk '$3 ~ /^resil_/ {print $3}')
    {
        echo "$includes"
        echo 'template <class T> static int keep(T *p) { return p != nullptr; }'
        echo 'int main() {'
        echo '    int n = 0;'
        printf '    n += keep(&%s);\n' "${exports[@]}"
        echo '    return n == 0;'
        echo '}'
    } >"$dir/linkage_$lib.cpp"
    "$CXX" -c "${cxxflags[@]}" "${ADAPTER_CFLAGS[@]}" "$dir/linkage_$lib.cpp" -o "$dir/linkage_$lib.o" ||
        fail "lib$lib.so exports functions that no installed header declares (see the errors above)"
    "$CXX" "$dir/linkage_$lib.o" -o "$dir/linkage_$lib" -L"$LIB" -l"$lib" -lresil "${link_flags[@]}" ||
        fail "lib$lib.so: the symbols above are declared without extern \"C\" (RESIL_BEGIN_DECLS/RESIL_END_DECLS)"
    note "lib$lib.so: all ${#exports[@]} exports are declared with C linkage"
done

text=$(PKG_CONFIG_PATH="$LIB/pkgconfig" pkg-config --cflags --libs resil) || fail "pkg-config --cflags --libs resil failed"
read -ra pc <<<"$text"
run "$CXX" "${cxxflags[@]}" "$SOURCE_DIR/tests/package/cxx_consumer.cpp" -o "$dir/cxx_consumer" \
    "${pc[@]}" "${link_flags[@]}"
out=$(LD_LIBRARY_PATH="$LIB" "$dir/cxx_consumer") || fail "cxx_consumer exited $?: $out"
expect="C++: succeeded after 3 attempts, 2 waits"
[[ "$out" == "$expect" ]] || fail "cxx_consumer printed '$out', expected '$expect'"
note "a C++ program links against libresil and runs: $out"
