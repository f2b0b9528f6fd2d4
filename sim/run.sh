#!/usr/bin/env bash
# run.sh -- runs ordo_probesim's standard scenarios (sim/README.md) and
# writes sim/results/: one `name value` file per run, table.md (the table
# docs/distributed.md's "The simulation" pastes), latency.dat and
# sim-latency.png (detection latency against cycle length, drawn by
# gnuplot), and bugs.md (the --bug-* options' phantom aborts and missed
# cycles, which must not be 0).
#
# Usage: sim/run.sh [--publish]   (from anywhere; make sim runs it)
#   --publish  also copies the plot to docs/img/sim-latency.png
# Environment: SIM (the binary, default build/sim/ordo_probesim), CYCLES
# (per run, default 5000), SEED (default 1).
#
# The scenarios: cycles of length 2, 4, 8 and 16, each key on its own shard
# of 1,000, the default workload (1 cycle begun per ms, 1 chain that ends
# per cycle, breakers on 30% of the cycles, RTT 0.2 ms, probe delay 1 ms,
# poll period 10 ms), for the probes, the coordinator, and the coordinator
# with a confirmation. The script fails when a correct run shows a phantom
# abort, a missed cycle or a cycle with two victims, and when a --bug-*
# option that disables a safety step shows none.
set -euo pipefail
cd "$(dirname "$0")/.."

SIM=${SIM:-build/sim/ordo_probesim}
CYCLES=${CYCLES:-5000}
SEED=${SEED:-1}
OUT=sim/results
publish=0
for a in "$@"; do
  case $a in
  --publish) publish=1 ;;
  *)
    echo "usage: sim/run.sh [--publish]" >&2
    exit 2
    ;;
  esac
done
if [ ! -x "$SIM" ]; then
  echo "run.sh: $SIM not found; build first (make build)" >&2
  exit 1
fi
mkdir -p "$OUT"
rm -f "$OUT"/*.txt "$OUT"/*.md "$OUT"/*.dat "$OUT"/*.png

# get FILE NAME -- one value of a run's `name value` output.
get() {
  awk -v k="$2" '$1 == k { print $2; found = 1 } END { exit !found }' "$1"
}

fail=0
# run NAME ARGS... -- one run into $OUT/NAME.txt; a correct one must show
# no phantom abort (but the coordinator without a confirmation, which is
# what it shows), no missed cycle, no cycle with two victims.
run() {
  local name=$1
  shift
  "$SIM" --seed "$SEED" --cycles "$CYCLES" "$@" >"$OUT/$name.txt"
  local ph mi mv
  ph=$(get "$OUT/$name.txt" phantom_aborts)
  mi=$(get "$OUT/$name.txt" missed)
  mv=$(get "$OUT/$name.txt" multi_victim_cycles)
  if [ "$mi" != 0 ] || [ "$mv" != 0 ] ||
    { [ "$ph" != 0 ] && [[ $name != central-L* ]]; }; then
    echo "run.sh: $name: phantom_aborts $ph, missed $mi," \
      "multi_victim_cycles $mv" >&2
    fail=1
  fi
}

start=$(date +%s)
printf '# L\tprobes_p50\tprobes_p99\tcentral_p50\tcentral_p99\tcc_p50\tcc_p99\n' \
  >"$OUT/latency.dat"
{
  echo "| cycle length | probes p50 | probes p99 | probes msgs/cycle |" \
    "probes phantoms | poller p50 | poller p99 | poller msgs/cycle |" \
    "poller phantoms | poller+confirm p99 | poller+confirm phantoms |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
} >"$OUT/table.md"
ms() { awk -v u="$1" 'BEGIN { printf "%.2f ms", u / 1000 }'; }
for L in 2 4 8 16; do
  [ -t 2 ] && printf '\rrun.sh: cycle length %s' "$L" >&2
  run "probes-L$L" --shards 1000 --len "$L"
  run "central-L$L" --shards 1000 --len "$L" --algo central
  run "cc-L$L" --shards 1000 --len "$L" --algo central --central-confirm
  p="$OUT/probes-L$L.txt" c="$OUT/central-L$L.txt" cc="$OUT/cc-L$L.txt"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$L" \
    "$(get "$p" latency_p50_us)" "$(get "$p" latency_p99_us)" \
    "$(get "$c" latency_p50_us)" "$(get "$c" latency_p99_us)" \
    "$(get "$cc" latency_p50_us)" "$(get "$cc" latency_p99_us)" \
    >>"$OUT/latency.dat"
  echo "| $L | $(ms "$(get "$p" latency_p50_us)") |" \
    "$(ms "$(get "$p" latency_p99_us)") | $(get "$p" messages_per_cycle) |" \
    "$(get "$p" phantom_aborts) | $(ms "$(get "$c" latency_p50_us)") |" \
    "$(ms "$(get "$c" latency_p99_us)") | $(get "$c" messages_per_cycle) |" \
    "$(get "$c" phantom_aborts) | $(ms "$(get "$cc" latency_p99_us)") |" \
    "$(get "$cc" phantom_aborts) |" >>"$OUT/table.md"
done
[ -t 2 ] && printf '\r\033[K' >&2

# The self-test: each option that disables a safety step must show what it
# breaks. --bug-no-versions is shown, not required to break anything: the
# confirmation catches what the versions would have dropped.
{
  echo "| option (probes, L=4, 1,000 shards) | phantom aborts | missed cycles |" \
    "confirms failed | probes dropped stale |"
  echo "|---|---:|---:|---:|---:|"
} >"$OUT/bugs.md"
for bug in none no-confirm no-pins no-versions no-reprobe; do
  args=()
  [ "$bug" != none ] && args=(--"bug-$bug")
  f="$OUT/bug-$bug.txt"
  "$SIM" --seed "$SEED" --cycles "$CYCLES" --shards 1000 --len 4 \
    "${args[@]}" >"$f"
  echo "| ${args[*]:-(none)} | $(get "$f" phantom_aborts) | $(get "$f" missed) |" \
    "$(get "$f" confirms_failed) | $(get "$f" probes_stale) |" >>"$OUT/bugs.md"
  case $bug in
  no-confirm | no-pins) want=phantom_aborts ;;
  no-reprobe) want=missed ;;
  *) want= ;;
  esac
  if [ -n "$want" ] && [ "$(get "$f" "$want")" = 0 ]; then
    echo "run.sh: --bug-$bug shows no $want: the check cannot fail" >&2
    fail=1
  fi
done
end=$(date +%s)
echo "sim/run.sh: $((end - start)) s, $CYCLES cycles per run, seed $SEED" \
  >"$OUT/runtime.txt"

if command -v gnuplot >/dev/null 2>&1; then
  gnuplot <<GP
set terminal pngcairo noenhanced size 800, 480 font "Sans,10"
set output "$OUT/sim-latency.png"
set title "Detection latency against cycle length (1,000 shards, RTT 0.2 ms, probe delay 1 ms, poll every 10 ms)"
set xlabel "cycle length (txns, each waiting on another shard)"
set ylabel "cycle closed to victim's -DEADLOCK (ms)"
set key top left maxrows 3
set grid
set xtics (2, 4, 8, 16)
set yrange [0:16]
plot "$OUT/latency.dat" using 1:(\$2/1000) with linespoints lw 2 title "probes p50", \
     "" using 1:(\$3/1000) with linespoints lw 2 dt 2 title "probes p99", \
     "" using 1:(\$4/1000) with linespoints lw 2 title "poller p50", \
     "" using 1:(\$5/1000) with linespoints lw 2 dt 2 title "poller p99", \
     "" using 1:(\$7/1000) with linespoints lw 2 dt 3 title "poller+confirm p99"
GP
  if [ $publish = 1 ]; then
    cp "$OUT/sim-latency.png" docs/img/sim-latency.png
  fi
else
  echo "run.sh: gnuplot not found (Debian: gnuplot-nox, which" \
    "scripts/bootstrap.sh installs); no plot drawn" >&2
  [ $publish = 1 ] && fail=1
fi

cat "$OUT/table.md"
echo
cat "$OUT/bugs.md"
cat "$OUT/runtime.txt"
exit $fail
