#!/bin/sh
# man.sh - a program's man page from its --help, with help2man (`make man`, `make install`).
#
#   scripts/man.sh PROGRAM VERSION 'WHAT IT IS' OUT.1
#
# PROGRAM is the built binary (bin/market-server). help2man reads the SYNOPSIS from a help
# text that starts "Usage: prog ..." and continues with "  or:  prog ..." lines; ours start
# "usage: prog ..." with the other forms indented below it, so help2man is given a wrapper
# that runs the program and rewrites just those lines (the rest of --help goes through as it
# is), found on PATH under the program's own name so the page names it without a folder.
# Exits with help2man's status (non-zero when --help failed or printed nothing).
set -eu
[ $# -eq 4 ] || {
    echo "usage: scripts/man.sh PROGRAM VERSION 'WHAT IT IS' OUT.1" >&2
    exit 2
}
prog=$1 version=$2 what=$3 out=$4
name=$(basename "$prog")
case $prog in /*) ;; *) prog=$PWD/$prog ;; esac
wrap=$(mktemp -d "${TMPDIR:-/tmp}/gm-man-XXXXXX")
trap 'rm -rf "$wrap"' EXIT
cat >"$wrap/$name" <<EOF
#!/bin/sh
# help2man's view of $name: "usage:" as "Usage:", the usage lines that follow as "or:"
"$prog" "\$@" | awk -v p="$name" '
    NR == 1 && sub(/^usage: /, "Usage: ") { syn = 1; print; next }
    syn && index(\$0, "       " p " ") == 1 { sub(/^       /, "  or:  "); print; next }
    { syn = 0; print }'
EOF
chmod +x "$wrap/$name"
PATH="$wrap:$PATH" help2man --no-info --section=1 --source=gamemarket \
    --version-string="$version" --name="$what" --output="$out.tmp" "$name"
mv "$out.tmp" "$out"
