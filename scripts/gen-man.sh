#!/usr/bin/env bash
# gen-man.sh RESIL SOURCE_DIR OUT — the manual pages and the shell
# completions, generated from what they describe so that they cannot drift:
#   OUT/man1/resil.1, OUT/man1/resil-CMD.1  from `resil --help` and each
#                                           `resil CMD --help`
#   OUT/man3/resil.3, OUT/man3/resil_H.3     from each public header's leading
#                                           comment and its declarations
#   OUT/completion/resil.bash, OUT/completion/_resil
#                                           every flag of every `--help`
# The build runs it after the tool is linked (cmake/docs.cmake); the tests
# check that each subcommand's options are all there (tests/docs).
# Not pipefail: a reader that stops early (SIGPIPE upstream) is no error here.
set -eu
resil=$1 src=$2 out=$3
version=$("$resil" --version | sed 's/^resil //')
date=$(date -u -d "@${SOURCE_DATE_EPOCH:-$(git -C "$src" log -1 --format=%ct 2>/dev/null || echo 0)}" +%Y-%m-%d)
mkdir -p "$out/man1" "$out/man3" "$out/completion"

# Text as roff: backslashes, minus signs, and lines that would be requests.
roff_text() { sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\([.']\)/\\\\\&\1/"; }

# The subcommands and their one-line summaries, from `resil --help`.
commands() { "$resil" --help | awk '/^commands:/ {on=1; next} on && /^$/ {on=0} on {print}'; }

# Every flag a help text names, on its option lines or in their text
# ("--method is the same"); a lone letter after one dash only as a short
# option ("-X,", "-E "), not a word of prose.
flags_of() {
  grep -oE '(^|[ ,(;])(--[A-Za-z][-A-Za-z0-9]*|-[A-Za-z]([ ,)]|$))' | sed -E 's/^[ ,(;]//; s/[ ,)]$//' |
    sort -u
}

page1() { # name summary help-text-file
  {
    echo ".TH ${1^^} 1 \"$date\" \"resil $version\" \"resil manual\""
    echo ".SH NAME"
    echo "$1 \\- $(echo "$2" | roff_text)"
    echo ".SH SYNOPSIS"
    echo ".nf"
    head -1 "$3" | sed 's/^usage: //' | roff_text
    echo ".fi"
    echo ".SH DESCRIPTION"
    echo ".nf"
    tail -n +2 "$3" | roff_text
    echo ".fi"
    echo ".SH SEE ALSO"
    if [[ $1 == resil ]]; then
      commands | awk '{printf "%sresil\\-%s (1)", sep, $1; sep=",\n"} END {print ",\nresil (3)"}'
    else
      echo "resil (1), resil (3)"
    fi
  } >"$out/man1/$1.1"
}

help=$(mktemp)
trap 'rm -f "$help"' EXIT
"$resil" --help >"$help"
page1 resil "retry commands and HTTP requests under a resilience policy" "$help"
bash_cases="" zsh_cases=""
names=$(commands | awk '{print $1}')
while read -r cmd summary; do
  "$resil" "$cmd" --help >"$help"
  page1 "resil-$cmd" "$summary" "$help"
  flags=$(flags_of <"$help" | tr '\n' ' ')
  bash_cases+="    $cmd) opts=\"$flags\" ;;"$'\n'
  zsh_cases+="    $cmd) compadd -- $flags ;;"$'\n'
done < <(commands)

# ---- resil(3) and a page per header ------------------------------------------
lead() { awk 'NR==1 && !/^\/\*/ {exit} NR>1 && /^ \*\// {exit} NR>1 {sub(/^ \* ?/, ""); print}' "$1"; }
# A header's summary: its comment's first paragraph, on one line, after
# "name.h — "; its description: the paragraphs after it.
summary() { lead "$1" | awk '/^$/ {exit} {printf "%s%s", sep, $0; sep=" "} END {print ""}' |
  sed 's/^[^ ]* — //'; }
details() { lead "$1" | awk 'on {print} /^$/ {on=1}'; }
# Its declarations, each whole (a prototype may span lines).
declarations() { awk '/^RESIL_API/ {on=1} on {print} on && /;/ {on=0; print ""}' "$1"; }
{
  echo ".TH RESIL 3 \"$date\" \"resil $version\" \"resil manual\""
  echo ".SH NAME"
  echo "resil \\- resilience library for C"
  echo ".SH SYNOPSIS"
  echo ".nf"
  echo "#include <resil.h>"
  echo ".fi"
  echo ".PP"
  echo "cc prog.c \$(pkg\\-config \\-\\-cflags \\-\\-libs resil)"
  echo ".SH DESCRIPTION"
  echo "One header per concept, each with its own page:"
  for h in "$src"/include/resil/*.h; do
    b=$(basename "$h" .h)
    echo ".TP"
    echo ".BR resil_$b (3)"
    summary "$h" | roff_text
  done
  echo ".PP"
  echo "The adapters are libraries of their own: resil\\-http (libcurl), resil\\-store"
  echo "(SQLite, PostgreSQL), resil\\-redis (hiredis) and resil\\-config (jansson), each"
  echo "with its pkg\\-config file and CMake target (resil::http, resil::store,"
  echo "resil::redis, resil::config)."
  echo ".SH SEE ALSO"
  echo "resil (1)"
} >"$out/man3/resil.3"
for h in "$src"/include/resil/*.h; do
  b=$(basename "$h" .h)
  {
    echo ".TH RESIL_${b^^} 3 \"$date\" \"resil $version\" \"resil manual\""
    echo ".SH NAME"
    echo "resil_$b \\- $(summary "$h" | roff_text)"
    echo ".SH SYNOPSIS"
    echo ".nf"
    echo "#include <resil/$b.h>"
    echo ""
    declarations "$h" | sed 's/^RESIL_API //' | roff_text
    echo ".fi"
    echo ".SH DESCRIPTION"
    echo ".nf"
    details "$h" | roff_text
    echo ".fi"
    echo ".PP"
    echo "Each declaration's comment in the header is its reference."
    echo ".SH SEE ALSO"
    echo "resil (3)"
  } >"$out/man3/resil_$b.3"
done

# ---- completions ---------------------------------------------------------------
top=$("$resil" --help | grep -E '^ +-' | flags_of | tr '\n' ' ')
cat >"$out/completion/resil.bash" <<B
# bash completion for resil $version (generated from its --help texts)
_resil() {
  local cur=\${COMP_WORDS[COMP_CWORD]} cmd=\${COMP_WORDS[1]} opts
  if [[ \$COMP_CWORD -eq 1 ]]; then
    COMPREPLY=(\$(compgen -W "$(echo $names) help $top" -- "\$cur"))
    return
  fi
  case \$cmd in
$bash_cases    help) opts="$(echo $names)" ;;
    *) opts="" ;;
  esac
  if [[ \$cur == -* || \$cmd == help ]]; then
    COMPREPLY=(\$(compgen -W "\$opts" -- "\$cur"))
  else
    COMPREPLY=(\$(compgen -f -- "\$cur"))
  fi
}
complete -o default -F _resil resil
B
cat >"$out/completion/_resil" <<Z
#compdef resil
# zsh completion for resil $version (generated from its --help texts)
if (( CURRENT == 2 )); then
  compadd -- $(echo $names) help $top
  return
fi
if [[ \$words[CURRENT] != -* && \$words[2] != help ]]; then
  _files
  return
fi
case \$words[2] in
$zsh_cases  help) compadd -- $(echo $names) ;;
esac
Z
