#!/usr/bin/env bash
# GPU machine: the SM clock and utilization every 100 ms (nvidia-smi) while a command runs, beside its output, to tell
# a slow run at an idle clock from a slow kernel (docs/PERFORMANCE.md, session 34). Writes $OUT/sm_clock.csv
# (time, SM MHz, utilization %; FIELDS=... other nvidia-smi --query-gpu fields after the SM clock, e.g.
# "timestamp,clocks.sm,power.draw,clocks_event_reasons.active"; TRACE=name another file name) and prints the clocks
# seen with their sample counts.
# Usage (carry .gl and gpu): bash gpu/sm_clock_trace.sh gpu/alpha bench gpu --only step --json
set -u
source "$(dirname "$0")/setup.sh"
trace=${OUT:-.}/${TRACE:-sm_clock.csv}
nvidia-smi --query-gpu=${FIELDS:-timestamp,clocks.sm,utilization.gpu} --format=csv,noheader -lms 100 > "$trace" 2>&1 &
smi=$!
"$@"
rc=$?
kill $smi 2>/dev/null
wait $smi 2>/dev/null
awk -F', ' '{n[$2]++} END {for (c in n) print "  " c ": " n[c] " samples"}' "$trace" | sort -t: -k1 -n
exit $rc
