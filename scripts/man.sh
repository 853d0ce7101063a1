#!/bin/sh
# man.sh - a program's man page from its --help, with help2man (`make man`, `make install`).
#
#   scripts/man.sh PROGRAM VERSION 'WHAT IT IS' OUT.1
#
# PROGRAM is the built binary (bin/market-server). help2man reads the SYNOPSIS from a help
# text that starts "Usage: prog ..." and continues with "  or:  prog ..." lines; ours start
# "usage: prog ..." with the other forms indented below it, so help2man is given a wrapper
# that runs the program and rewrites just those lines (a form continued on a line indented
# further is joined into one), found on PATH under the program's own name so the page names
# it without a folder. The rest of --help goes through as it is, but for one thing: the
# wrapper moves an option's environment twin, which market-server's --help prints
# at the right of the option's first line (MARKET_LISTEN, MARKET_NO_AUTH=1), to the end of
# the option's text as a sentence of its own ("Environment: MARKET_LISTEN."): help2man
# knows two columns, and would run the third into the text. The page is set ragged-right
# without hyphenation (.ad l, .nh): its URLs and paths are long words that a justified
# line stretches around, or splits at a hyphen that is not theirs.
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
# (a usage form continued on a line indented further joined to its first line),
# and an option's environment twin at the end of its text
"$prog" "\$@" | awk -v p="$name" '
    function twin() { if (env != "") print "                            Environment: " env "."; env = "" }
    function flush() { if (held != "") print held; held = "" }
    NR == 1 && sub(/^usage: /, "Usage: ") { syn = 1; held = \$0; next }
    syn && index(\$0, "       " p " ") == 1 { flush(); sub(/^       /, "  or:  "); held = \$0; next }
    syn && /^        +[^ ]/ { l = \$0; sub(/^ +/, "", l); held = held " " l; next }
    { syn = 0; flush() }
    /^     / && env != "" { print; next }
    { twin() }
    /^  -.*  +MARKET_[A-Z0-9_]+(=1)?\$/ { env = \$NF; sub(/ +MARKET_[A-Z0-9_]+(=1)?\$/, "") }
    { print }
    END { flush(); twin() }'
EOF
chmod +x "$wrap/$name"
PATH="$wrap:$PATH" help2man --no-info --section=1 --source=gamemarket \
    --version-string="$version" --name="$what" --output="$out.tmp" "$name"
sed '/^\.TH /a\
.ad l\
.nh' "$out.tmp" >"$out.tmp2"
rm -f "$out.tmp"
mv "$out.tmp2" "$out"
