#!/usr/bin/env bash
# umbrella.sh — package.umbrella: <resil.h> alone declares everything
# libresil exports.
#
# The umbrella is the one include the README promises for the core; a core
# header that is installed but not included from it leaves part of the API
# reachable only by knowing the file's name. The check is mechanical: a C file
# that includes nothing but <resil.h> and names every resil_* symbol in
# libresil.so's dynamic table must compile. (Adapters keep their own headers,
# outside the umbrella, so their libraries are not part of this.)
. "$(dirname "$0")/lib.sh"
need_installed

dir=$(scratch umbrella)
mapfile -t exports < <(nm -D --defined-only "$LIB/libresil.so" | awk '$3 ~ /^resil_/ {print $3}')
[[ ${#exports[@]} -gt 0 ]] || fail "libresil.so exports no resil_* symbol"
{
    echo '#include <resil.h>'
    echo 'int main(void) {'
    printf '    (void)&%s;\n' "${exports[@]}"
    echo '    return 0;'
    echo '}'
} >"$dir/umbrella.c"
if ! LC_ALL=C "$CC" -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$INC" "$dir/umbrella.c" 2>"$dir/errors"; then
    missing=$(grep -o "'resil_[a-z0-9_]*' undeclared\|undeclared identifier 'resil_[a-z0-9_]*'" "$dir/errors" |
              grep -o "resil_[a-z0-9_]*" | sort -u || true)
    [[ -n "$missing" ]] || { cat "$dir/errors" >&2; fail "a file including only <resil.h> does not compile"; }
    owners=$(grep -l -w -F "$missing" "$INC"/resil/*.h 2>/dev/null | xargs -r -n1 basename | sort -u)
    fail "<resil.h> does not declare these libresil exports: $(oneline "$missing") — declared in: $(oneline "${owners:-no installed header}")"
fi
note "<resil.h> declares all ${#exports[@]} resil_* symbols libresil.so exports"
