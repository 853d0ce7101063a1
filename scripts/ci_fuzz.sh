#!/bin/sh
# ci_fuzz.sh - replays the fuzz regressions, then runs each libFuzzer harness for a bounded time.
#
# Called by `make fuzz` once the harnesses are built ($FUZZ_BUILD/fuzz_<name>, from
# tests/fuzz/fuzz_<name>.c). For each harness:
#   1. every file in tests/fuzz/regressions/<name>/ is run once (one test each);
#   2. the harness fuzzes for FUZZ_SECONDS from tests/fuzz/corpus_<name>/ (read only)
#      with tests/fuzz/fuzz.dict; new inputs go to $FUZZ_BUILD/run/<name>/corpus, which
#      is emptied first, so runs are comparable and the repository stays clean.
# Harnesses run at once when there are cores for them (FUZZ_JOBS, default: nproc).
# FUZZ_COVERAGE=1 then rebuilds each harness with source-based coverage, replays
# its final corpus and prints the line coverage of api/*.c (needs FUZZ_CPPFLAGS
# and FUZZ_LIBS, which `make fuzz` passes, and llvm-profdata / llvm-cov).
# Any crash, leak, sanitizer report, broken invariant or timeout fails the run; its
# input is kept in $FUZZ_BUILD/run/<name>/artifacts/ and the command to keep it as a
# regression is printed. Ends with "fuzz: N passed, M failed" (regressions + harnesses).
set -u
FUZZ_BUILD=${FUZZ_BUILD:-build/fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_JOBS=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
FUZZ_TIMEOUT=${FUZZ_TIMEOUT:-10} # seconds one input may take
case "$FUZZ_SECONDS" in '' | *[!0-9]*) echo "ci_fuzz: FUZZ_SECONDS must be a whole number" >&2; exit 2 ;; esac
[ "$FUZZ_SECONDS" -ge 1 ] || FUZZ_SECONDS=1

# Sanitizers: stop at the first report, symbolize, and let libFuzzer catch leaks per input.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1:abort_on_error=1:symbolize=1"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:halt_on_error=1"

names=""
for src in tests/fuzz/fuzz_*.c; do
    [ -e "$src" ] || continue
    n=$(basename "$src" .c)
    names="$names ${n#fuzz_}"
done
[ -n "$names" ] || { echo "ci_fuzz: no harness in tests/fuzz/" >&2; exit 1; }

passed=0
failed=0
bad=""
run="$FUZZ_BUILD/run"
rm -rf "$run"

# ---- 1. regressions ----
for n in $names; do
    bin="$FUZZ_BUILD/fuzz_$n"
    mkdir -p "$run/$n/corpus" "$run/$n/artifacts"
    [ -x "$bin" ] || { echo "ci_fuzz: $bin is not built" >&2; exit 1; }
    for f in tests/fuzz/regressions/"$n"/*; do
        [ -f "$f" ] || continue
        if "$bin" -timeout="$FUZZ_TIMEOUT" "$f" >"$run/$n/replay.log" 2>&1; then
            passed=$((passed + 1))
        else
            failed=$((failed + 1)); bad="$bad $n:$(basename "$f")"
            echo "== regression $f fails:"; tail -n 40 "$run/$n/replay.log"
        fi
    done
done
echo "fuzz: regressions replayed: $passed passed, $failed failed"

# ---- 2. bounded fuzzing ----
fuzz_one() { # $1: name; runs in the background when FUZZ_JOBS allows
    "$FUZZ_BUILD/fuzz_$1" -max_total_time="$FUZZ_SECONDS" -timeout="$FUZZ_TIMEOUT" \
        -dict=tests/fuzz/fuzz.dict -print_final_stats=1 \
        -artifact_prefix="$run/$1/artifacts/" "$run/$1/corpus" "tests/fuzz/corpus_$1" \
        >"$run/$1/fuzz.log" 2>&1
    echo $? >"$run/$1/rc"
}

count=$(echo "$names" | wc -w)
if [ "$FUZZ_JOBS" -ge "$count" ]; then
    echo "fuzz: running$names for ${FUZZ_SECONDS}s each, at once"
    pids=""
    for n in $names; do
        fuzz_one "$n" &
        pids="$pids $!"
    done
    for p in $pids; do wait "$p"; done
else
    echo "fuzz: running$names for ${FUZZ_SECONDS}s each, one after another"
    for n in $names; do fuzz_one "$n"; done
fi

# One line per harness: execs, exec/s, edges covered of those instrumented, features, corpus.
for n in $names; do
    log="$run/$n/fuzz.log"
    rc=$(cat "$run/$n/rc" 2>/dev/null || echo 1)
    total=$(sed -n 's/.*Loaded [0-9]* modules *(\([0-9]*\) inline 8-bit counters).*/\1/p' "$log" | head -n 1)
    last=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
    cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
    ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
    corp=$(echo "$last" | sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p')
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    newu=$(sed -n 's/^stat::new_units_added: *//p' "$log")
    pct=""
    [ -n "$cov" ] && [ -n "$total" ] && [ "$total" -gt 0 ] &&
        pct=" ($(awk -v c="$cov" -v t="$total" 'BEGIN { printf "%.1f%%", 100 * c / t }'))"
    echo "fuzz_$n: ${execs:-?} execs, ${eps:-?} exec/s, cov ${cov:-?} of ${total:-?} edges$pct," \
        "ft ${ft:-?}, corpus ${corp:-?} (${newu:-?} new)"
    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1)); bad="$bad fuzz_$n(exit $rc)"
        echo "== fuzz_$n failed (exit $rc); the end of $log:"
        tail -n 60 "$log"
        for a in "$run/$n"/artifacts/*; do
            [ -f "$a" ] || continue
            echo "== input: $a"
            echo "   replay: $FUZZ_BUILD/fuzz_$n $a"
            echo "   keep:   cp $a tests/fuzz/regressions/$n/<what-it-was>"
        done
    fi
done

# ---- 3. optional: source line coverage of api/ by the final corpora ----
if [ "${FUZZ_COVERAGE:-0}" = 1 ]; then
    cdir="$FUZZ_BUILD/coverage"
    mkdir -p "$cdir"
    for n in $names; do
        # shellcheck disable=SC2086
        if ! ${FUZZ_CC:-clang} ${FUZZ_CPPFLAGS:-} -O0 -g -pthread -fsanitize=fuzzer \
            -fprofile-instr-generate -fcoverage-mapping -o "$cdir/fuzz_$n" "tests/fuzz/fuzz_$n.c" \
            rconn/*.c lock/*.c market/*.c api/*.c ${FUZZ_LIBS:-} >"$cdir/$n.build.log" 2>&1; then
            echo "fuzz_$n coverage: build failed (see $cdir/$n.build.log)"
            continue
        fi
        rm -f "$cdir/$n.profraw"
        LLVM_PROFILE_FILE="$cdir/$n.profraw" "$cdir/fuzz_$n" -runs=0 "$run/$n/corpus" \
            "tests/fuzz/corpus_$n" >"$cdir/$n.replay.log" 2>&1
        ${LLVM_PROFDATA:-llvm-profdata} merge -sparse "$cdir/$n.profraw" -o "$cdir/$n.profdata" &&
            ${LLVM_COV:-llvm-cov} report "$cdir/fuzz_$n" -instr-profile="$cdir/$n.profdata" \
                api/*.c >"$cdir/$n.report" 2>&1
        # columns: file (common prefix stripped), regions, missed, cover, functions, missed,
        # executed, lines, missed, cover; files the harness does not reach are left out
        echo "fuzz_$n line coverage: $(awk '$1 ~ /\.c$/ && $8 > $9 {
            printf "%sapi/%s %s (%d/%d lines)", sep, $1, $10, $8 - $9, $8; sep = ", " }' \
            "$cdir/$n.report")"
    done
    echo "fuzz: coverage reports in $cdir/*.report (llvm-cov show for the lines)"
fi

echo
[ -n "$bad" ] && echo "failing:$bad"
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
