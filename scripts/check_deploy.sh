#!/bin/sh
# check_deploy.sh - checks deploy/: the Prometheus alerts and scrape config, the Grafana files.
#
#   promtool check rules deploy/prometheus/alerts.yml        the rules parse
#   promtool test rules deploy/prometheus/alerts_test.yml    alerts fire on made-up series
#   promtool check config deploy/prometheus/prometheus.yml   offline: no target is scraped
#   the metric names the rules and deploy/grafana/market.json use are ones server/ renders
#   deploy/grafana/*.json parses as JSON (when python3 is there)
#
# Without promtool (scripts/ci_deps.sh promtool installs it) the promtool checks are
# skipped with a message. Prints cmocka-style lines so that tests/run.sh counts the checks.
set -u
cd "$(dirname "$0")/.." || exit 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
failed_names=""
ran=0

# check NAME COMMAND...: runs the command as one test; its output is shown indented.
check() {
    name=$1
    shift
    ran=$((ran + 1))
    echo "[ RUN      ] $name"
    "$@" >"$tmp/out" 2>&1
    rc=$?
    sed 's/^/    /' "$tmp/out"
    if [ "$rc" -eq 0 ]; then
        echo "[       OK ] $name"
        passed=$((passed + 1))
    else
        echo "[  FAILED  ] $name (exit $rc)"
        failed=$((failed + 1))
        failed_names="$failed_names $name"
    fi
}

# Every market_* / process_* name in the rules and the dashboard, less a histogram's
# _bucket/_count/_sum suffix, must appear in server/'s sources as a rendered name.
metric_names_known() {
    bad=0
    names='\b(market|process)_[a-z_]+_(total|seconds|bytes|fds|info|up|depth|flight|connections|bucket|count|sum)\b'
    for metric in $(grep -ohE "$names" deploy/prometheus/alerts.yml \
        deploy/grafana/market.json | sed -E 's/_(bucket|count|sum)$//' | sort -u); do
        if ! grep -q "\"$metric[ \"{]" server/metrics.c server/process.c; then
            echo "not rendered by server/: $metric"
            bad=1
        fi
    done
    return "$bad"
}

json_parses() {
    command -v python3 >/dev/null 2>&1 || { echo "python3 missing: not parsed"; return 0; }
    for f in deploy/grafana/*.json; do python3 -m json.tool "$f" >/dev/null || return 1; done
}

if command -v promtool >/dev/null 2>&1; then
    check promtool_check_rules promtool check rules deploy/prometheus/alerts.yml
    check promtool_test_rules promtool test rules deploy/prometheus/alerts_test.yml
    check promtool_check_config promtool check config deploy/prometheus/prometheus.yml
else
    echo "check_deploy: promtool checks skipped: promtool is not installed (scripts/ci_deps.sh promtool)"
fi
check deploy_metric_names_known metric_names_known
check grafana_json_parses json_parses

echo "[==========] $ran test(s) run."
echo "[  PASSED  ] $passed test(s)."
if [ "$failed" -gt 0 ]; then
    echo "[  FAILED  ] $failed test(s), listed below:"
    for name in $failed_names; do
        echo "[  FAILED  ] $name"
    done
    exit 1
fi
