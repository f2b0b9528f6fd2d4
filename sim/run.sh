#!/usr/bin/env bash
# run.sh -- runs ordo_probesim's standard scenarios (sim/README.md) and
# writes sim/results/: one `name value` file per run, table.md (the table
# docs/distributed.md's "The simulation" pastes), latency.dat and
# sim-latency.png (detection latency against cycle length, drawn by
# gnuplot), faults.md (the probes under each fault option) and bugs.md (the
# --bug-* options' phantom aborts, missed cycles and two holders, which must
# not all be 0).
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
# with a confirmation; then the probes at L=4 under each fault option and
# all of them at once; then each --bug-* option, on the faults that show
# what it breaks, beside the protocol on the same faults. The script fails
# when a correct run shows a phantom abort, a missed cycle, a cycle with two
# victims or two holders of a key, and when a --bug-* option that disables
# a safety step shows none of what it guards.
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

# get FILE NAME -- one value of a run's `name value` output (read by the
# shell itself: an awk per look costs more than the runs on a busy machine).
get() {
  local k v
  while read -r k v; do
    if [ "$k" = "$2" ]; then
      echo "$v"
      return 0
    fi
  done <"$1"
  return 1
}

fail=0
# run NAME ARGS... -- one run into $OUT/NAME.txt; a correct one must show
# no phantom abort (but the coordinator without a confirmation, which is
# what it shows), no missed cycle, no cycle with two victims.
run() {
  local name=$1
  shift
  "$SIM" --seed "$SEED" --cycles "$CYCLES" "$@" >"$OUT/$name.txt"
  local ph mi mv th
  ph=$(get "$OUT/$name.txt" phantom_aborts)
  mi=$(get "$OUT/$name.txt" missed)
  mv=$(get "$OUT/$name.txt" multi_victim_cycles)
  th=$(get "$OUT/$name.txt" two_holders)
  if [ "$mi" != 0 ] || [ "$mv" != 0 ] || [ "$th" != 0 ] ||
    { [ "$ph" != 0 ] && [[ $name != central-L* ]]; }; then
    echo "run.sh: $name: phantom_aborts $ph, missed $mi," \
      "multi_victim_cycles $mv, two_holders $th" >&2
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

# The faults: the probes at L=4 under each fault option alone, then all at
# once. Each fault's rate is chosen so that it happens often (see
# sim/README.md, "Faults"); what must stay 0 stays 0.
{
  echo "| faults (probes, L=4, 1,000 shards) | how often | p50 | p99 |" \
    "msgs/cycle | phantoms | missed | two victims | two holders |" \
    "longest standing |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
} >"$OUT/faults.md"
# fault NAME "COUNTER WORDS,..." ARGS... -- one row: each COUNTER of the
# run says how often its fault happened, in WORDS.
fault() {
  local name=$1 counters=$2
  shift 2
  [ -t 2 ] && printf '\rrun.sh: faults %s\033[K' "$name" >&2
  run "fault-$name" --shards 1000 --len 4 "$@"
  local f="$OUT/fault-$name.txt" n="" c words cs
  IFS=, read -ra cs <<<"$counters"
  for c in "${cs[@]}"; do
    words=${c#* }
    n="${n:+$n, }$(get "$f" "${c%% *}") $words"
  done
  echo "| ${*:-(none)} | ${n:--} | $(ms "$(get "$f" latency_p50_us)") |" \
    "$(ms "$(get "$f" latency_p99_us)") | $(get "$f" messages_per_cycle) |" \
    "$(get "$f" phantom_aborts) | $(get "$f" missed) |" \
    "$(get "$f" multi_victim_cycles) | $(get "$f" two_holders) |" \
    "$(get "$f" longest_standing_ms) ms |" >>"$OUT/faults.md"
}
fault none ""
fault breaks "link_breaks breaks" --link-break 0.002
fault spikes "delay_spikes spikes" --spike 0.01
fault freezes "freezes freezes" --freeze 0.1
fault disconnects "disconnects disconnects" --disconnect 0.1
fault leases "leases_expired leases" --lease 0.1
fault timeouts "broken_by_timeout cycles broken by a timeout" --break-frac 0.6
fault overlap "aborts_gave_up aborts gave up for another" --overlap 0.5
fault all "link_breaks breaks,delay_spikes spikes,freezes freezes,disconnects disconnects,leases_expired leases" \
  --link-break 0.002 --spike 0.01 --freeze 0.1 --disconnect 0.1 \
  --lease 0.1 --break-frac 0.6 --overlap 0.5
[ -t 2 ] && printf '\r\033[K' >&2

# The self-test: each option that disables a safety step must show what it
# breaks, on the faults that show it, where the protocol shows nothing.
# --bug-no-versions is shown, not required to break anything: the
# confirmation catches what the versions would have dropped.
{
  echo "| option (probes, L=4, 1,000 shards) | on the faults | phantom aborts |" \
    "missed cycles | two victims | two holders | confirms failed |" \
    "probes dropped stale | the protocol on the same faults |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---|"
} >"$OUT/bugs.md"
# bug NAME WANT ARGS... -- the bug's row; WANT is what it must show.
bug() {
  local name=$1 want=$2
  shift 2
  local args=() faults=()
  [ "$name" != none ] && args=(--"bug-$name")
  faults=("$@")
  [ -t 2 ] && printf '\rrun.sh: --bug-%s\033[K' "$name" >&2
  local f="$OUT/bug-$name.txt" g="$OUT/bug-$name-fixed.txt"
  "$SIM" --seed "$SEED" --cycles "$CYCLES" --shards 1000 --len 4 \
    "${args[@]}" "${faults[@]}" >"$f"
  local fixed="-"
  if [ ${#faults[@]} -gt 0 ]; then
    run "bug-$name-fixed" --shards 1000 --len 4 "${faults[@]}"
    fixed="$(get "$g" phantom_aborts) phantoms, $(get "$g" missed) missed,"
    fixed="$fixed $(get "$g" two_holders) two holders"
  fi
  echo "| ${args[*]:-(none)} | ${faults[*]:-(none)} |" \
    "$(get "$f" phantom_aborts) | $(get "$f" missed) |" \
    "$(get "$f" multi_victim_cycles) | $(get "$f" two_holders) |" \
    "$(get "$f" confirms_failed) | $(get "$f" probes_stale) | $fixed |" \
    >>"$OUT/bugs.md"
  if [ -n "$want" ] && [ "$(get "$f" "$want")" = 0 ]; then
    echo "run.sh: --bug-$name shows no $want: the check cannot fail" >&2
    fail=1
  fi
}
bug none ""
bug no-confirm phantom_aborts
bug no-pins phantom_aborts
bug no-versions ""
bug no-reprobe missed
bug release-first two_holders --lease 0.5 --disconnect 0.5
bug one-pin phantom_aborts --overlap 1 --spike 0.02
bug told-on-drop missed --link-break 0.01
bug no-defer phantom_aborts --disconnect 0.5 --lease 0.5
bug no-giveup phantom_aborts --overlap 1
[ -t 2 ] && printf '\r\033[K' >&2
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
cat "$OUT/faults.md"
echo
cat "$OUT/bugs.md"
cat "$OUT/runtime.txt"
exit $fail
