# bench_plot.gp - bench/results.png from the per-strategy data files that scripts/bench.sh writes.
#
#   gnuplot -e "datadir='bench/raw'; strategies='market item optimistic'; out='bench/results.png'; \
#               term='pngcairo'; subtitle='...'" scripts/bench_plot.gp
#
# Each datadir/<strategy>-<mix>.dat holds "buyers purchases_per_s p50_ms p99_ms" rows.
# Top row: the distinct mix (contention only on the lock); bottom row: the contended mix.

if (!exists("datadir")) datadir = 'bench/raw'
if (!exists("strategies")) strategies = 'market item optimistic'
if (!exists("out")) out = 'bench/results.png'
if (!exists("term")) term = 'pngcairo'
if (!exists("subtitle")) subtitle = ''

if (term eq 'pngcairo') {
    set terminal pngcairo size 1280,900 enhanced font 'DejaVu Sans,10'
} else {
    set terminal png size 1280,900
}
set output out

set logscale x 2
set xtics ("1" 1, "8" 8, "64" 64)
set xrange [0.8:80]
set grid
set key top left
set style data linespoints
file(s, mix) = sprintf('%s/%s-%s.dat', datadir, s, mix)

set multiplot layout 2,2 title 'market-load: POST /purchase by lock strategy'.(subtitle eq '' ? '' : "\n".subtitle)

set title 'distinct mix: purchases/s'
set xlabel 'concurrent buyers'
set ylabel 'purchases/s'
set yrange [0:*]
plot for [s in strategies] file(s, 'distinct') using 1:2 title s lw 2 pt 7

set title 'distinct mix: p99 latency'
set ylabel 'p99 ms (log)'
set logscale y
set yrange [*:*]
plot for [s in strategies] file(s, 'distinct') using 1:4 title s lw 2 pt 7
unset logscale y

set title 'contended mix: purchases/s'
set ylabel 'purchases/s'
set yrange [0:*]
plot for [s in strategies] file(s, 'contended') using 1:2 title s lw 2 pt 7

set title 'contended mix: p99 latency'
set ylabel 'p99 ms (log)'
set logscale y
set yrange [*:*]
plot for [s in strategies] file(s, 'contended') using 1:4 title s lw 2 pt 7

unset multiplot
