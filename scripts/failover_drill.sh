#!/usr/bin/env bash
# failover_drill.sh - runs the failover tests of tests/integration/test_ha.c RUNS times and
# tabulates, per scenario, the purchases answered OK that were not in the store afterwards
# (must be 0), the items answered OK to two buyers (must be 0), and the longest time without
# a successful purchase (min, median, max over the runs).
#
#   scripts/failover_drill.sh                 # 10 runs of every scenario (about 40 minutes)
#   DRILL_RUNS=3 DRILL_FILTER='*planned*' scripts/failover_drill.sh
#
# Needs build/tests/test_ha (make build). Each test starts its own master, replicas and
# three Sentinels on loopback (tests/helpers/sentinel_proc.c). Raw output goes to
# $DRILL_OUT (default build/drill), one file per run. Exit status: 0, or 1 when any run
# failed or lost a purchase.
set -u
cd "$(dirname "$0")/.." || exit 1
RUNS=${DRILL_RUNS:-10}
FILTER=${DRILL_FILTER:-'*_none_lost*'}
OUT=${DRILL_OUT:-build/drill}
BIN=${BUILD:-build}/tests/test_ha
[ -x "$BIN" ] || { echo "drill: $BIN is missing (make build)" >&2; exit 1; }
mkdir -p "$OUT" || exit 1
rm -f "$OUT"/run-*.txt
status=0
for i in $(seq "$RUNS"); do
    echo "drill: run $i of $RUNS ($FILTER)"
    TEST_FILTER=$FILTER "$BIN" >"$OUT/run-$i.txt" 2>&1 || status=1
done
# "[ RUN      ] test_x", then "<what>: ok=... longest gap without a purchase G ms", then
# "checked N OK answers: L not in the store, T items sold twice"
awk '
    /^\[ RUN/ { t = $NF; sub(/^test_ha_/, "", t) }
    /longest gap without a purchase/ { g = $(NF - 1); gaps[t] = gaps[t] " " g; n[t]++ }
    /^checked [0-9]+ OK answers/ { oks[t] += $2; lost[t] += $5; twice[t] += $10 }
    /^\[  FAILED  \] test_/ { f = $NF; sub(/^test_ha_/, "", f); failed[f]++ }
    END {
        printf "| scenario | runs | OKs checked | lost | sold twice | failed runs | longest gap without a purchase, ms: min / median / max |\n"
        printf "|---|---:|---:|---:|---:|---:|---|\n"
        for (t in n) {
            k = split(substr(gaps[t], 2), v, " ")
            for (a = 1; a <= k; a++) for (b = a + 1; b <= k; b++) if (v[b] + 0 < v[a] + 0) { x = v[a]; v[a] = v[b]; v[b] = x }
            med = k % 2 ? v[(k + 1) / 2] : int((v[k / 2] + v[k / 2 + 1]) / 2)
            printf "| %s | %d | %d | %d | %d | %d | %d / %d / %d |\n", t, n[t], oks[t], lost[t], twice[t], failed[t] + 0, v[1], med, v[k]
        }
    }' "$OUT"/run-*.txt | tee "$OUT/table.md"
awk -F'|' 'NR > 2 && ($5 + 0 > 0 || $6 + 0 > 0 || $7 + 0 > 0) { bad = 1 } END { exit bad }' \
    "$OUT/table.md" || status=1
exit "$status"
