#!/usr/bin/env bash
# bench/run.sh: start five redis-servers on free ports, run BenchmarkLocks
# (which starts its own embedded etcd) -count times, then the cross-process
# TestProcesses and BenchmarkTurns (issue 31's 32-goroutine pairs in
# turns), stop the servers, and write the markdown report.
#
#   bench/run.sh                      # full run: -count 4, -benchtime 200ms
#   COUNT=1 BENCHTIME=100ms bench/run.sh             # quick look
#   BENCH='Locks/serial/redis1' PROCS=0 bench/run.sh  # a subset, no cross-process run
#   PROCS=2s bench/run.sh             # each cross-process run 2 s long (default 1s)
#   TURNS=20 bench/run.sh             # 20 turns per round of BenchmarkTurns (default 10, or 0
#                                     # when BENCH is given: a subset runs no BenchmarkTurns)
#   PROFILE='Locks/parallel/redis1/lockswap-goredis' bench/run.sh
#                                     # CPU and memory profiles of one benchmark
#   REPORT=/tmp/r.md BENCH='Locks/(serial|contended)/redlock' PROCS=0 bench/run.sh
#                                     # a subset, reported to /tmp/r.md only
#   REPORT=/tmp/t.md BENCH='^$' PROCS=0 TURNS=10 COUNT=6 bench/run.sh
#                                     # BenchmarkTurns alone: its table only (REPORT needed)
#
# Output: bench/results/raw.txt (go test output), bench/results/latest.md
# (the table), and the generated section of docs/benchmarks.md, replaced in
# place; with REPORT set, the go test output and the table go to $REPORT.raw
# and $REPORT, and nothing in the repository changes. Either way the report
# ends with each benchmark against the committed run (HEAD's
# bench/results/raw.txt, when there is one), flagging a median outside that
# run's range. Needs redis-server on PATH.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
results="$here/results"
mkdir -p "$results"
raw="$results/raw.txt"
latest="$results/latest.md"
if [ -n "${REPORT:-}" ]; then
	raw="$REPORT.raw"
	latest="$REPORT"
fi

# BenchmarkTurns runs TURNS turns per round: 10 by default, none by
# default when BENCH picks a subset.
if [ -z "${TURNS:-}" ]; then
	if [ -n "${BENCH:-}" ]; then TURNS=0; else TURNS=10; fi
fi
COUNT=${COUNT:-4}
BENCHTIME=${BENCHTIME:-200ms}
BENCH=${BENCH:-Locks}
PROCS=${PROCS:-1s}
REPORT=${REPORT:-}
NSERVERS=5
if [ "$BENCH" = '^$' ] && [ -z "$REPORT" ]; then
	# Its report would replace the committed results (the regression
	# guard's baseline) and the generated tables with BenchmarkTurns's.
	echo "BENCH='^\$' runs no BenchmarkLocks: set REPORT=<file>" >&2
	exit 2
fi

command -v redis-server >/dev/null || { echo "redis-server not found on PATH" >&2; exit 1; }

workdir=$(mktemp -d /tmp/lockswap-bench.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]:-}"; do
		[ -n "$p" ] && kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	rm -rf "$workdir"
}
trap cleanup EXIT INT TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_one starts a redis-server on a random free port and waits until it
# answers; it retries on another port when the bind fails (a port that was
# free a moment ago can be taken by another process).
addrs=()
start_one() {
	local i=$1 attempt port pid
	mkdir -p "$workdir/r$i"
	for attempt in $(seq 1 10); do
		port=$((20000 + RANDOM % 30000))
		port_free "$port" || continue
		redis-server --port "$port" --bind 127.0.0.1 --dir "$workdir/r$i" \
			--save "" --appendonly no --protected-mode no --loglevel warning \
			>"$workdir/r$i.log" 2>&1 &
		pid=$!
		for _ in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			if redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; then
				pids+=("$pid")
				addrs+=("127.0.0.1:$port")
				return 0
			fi
			sleep 0.05
		done
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	echo "redis-server $i did not start:" >&2
	cat "$workdir/r$i.log" >&2
	return 1
}
for i in $(seq 1 $NSERVERS); do
	start_one "$i"
done
export LOCKSWAP_BENCH_REDIS=$(IFS=,; echo "${addrs[*]}")
echo "redis-servers: $LOCKSWAP_BENCH_REDIS" >&2

cd "$here"
if [ -n "${PROFILE:-}" ]; then
	go test -run '^$' -bench "$PROFILE" -benchmem -count 1 -benchtime "${BENCHTIME}" \
		-cpuprofile "$results/cpu.out" -memprofile "$results/mem.out" -o "$results/bench.test" . | tee "$results/profile-raw.txt"
	go tool pprof -top -nodecount 30 "$results/bench.test" "$results/cpu.out" >"$results/cpu-top.txt" 2>/dev/null
	go tool pprof -top -nodecount 30 -sample_index alloc_space "$results/bench.test" "$results/mem.out" >"$results/mem-top.txt" 2>/dev/null
	echo "profiles: $results/cpu-top.txt $results/mem-top.txt" >&2
	exit 0
fi

start=$(date +%s)
# A failed benchmark (a library that errs) leaves the others' figures: the
# report is written all the same, and run.sh exits with the failure.
status=0
go test -run '^$' -bench "$BENCH" -benchmem -count "$COUNT" -benchtime "$BENCHTIME" -timeout 30m . | tee "$raw" || status=$?
# The contended scenario across 8 OS processes (the test binary
# re-executed), PROCS long, once per round.
if [ "$PROCS" != 0 ]; then
	go test -c -o "$workdir/bench.test" .
	for _ in $(seq 1 "$COUNT"); do
		LOCKSWAP_BENCH_PROCS=$PROCS "$workdir/bench.test" -test.run '^TestProcesses$' -test.count 1 -test.timeout 10m | grep '^BenchmarkLocks/' | tee -a "$raw"
	done
fi
# Issue 31's 32-goroutine pairs in turns (BenchmarkTurns), COUNT rounds
# of TURNS turns each.
if [ "$TURNS" != 0 ]; then
	# The whole output goes to the raw results (a failure's message with
	# it; the report reads the result lines only). The timeout allows
	# about three times what the turns take (13 pairs under 2 contexts,
	# about 0.35 s a turn), so that a hung server ends the run with a
	# stack dump.
	go test -run '^$' -bench '^BenchmarkTurns$' -count "$COUNT" -benchtime "${TURNS}x" \
		-timeout "$((COUNT * (TURNS + 1) * 26 + 600))s" . | tee -a "$raw" || status=$?
fi
took=$(( $(date +%s) - start ))
procscmd=""
if [ "$PROCS" != 0 ]; then
	procscmd=", then $COUNT × \`LOCKSWAP_BENCH_PROCS=$PROCS bench.test -test.run '^TestProcesses\$'\` (8 OS processes per library)"
fi
turnscmd=""
if [ "$TURNS" != 0 ]; then
	turnscmd=", then \`go test -run '^\$' -bench '^BenchmarkTurns\$' -count $COUNT -benchtime ${TURNS}x\` (TURNS=$TURNS)"
fi

# The regression guard: the committed run (HEAD's bench/results/raw.txt),
# when there is one, is what the report compares this run with.
previous=()
prevnote="no committed run to compare with (HEAD has no bench/results/raw.txt)."
if git -C "$root" show HEAD:bench/results/raw.txt >"$workdir/previous-raw.txt" 2>/dev/null; then
	prevcommit=$(git -C "$root" rev-parse --short HEAD)
	previous=(-previous "$workdir/previous-raw.txt" -previous-label "bench/results/raw.txt of commit $prevcommit")
	prevnote="bench/results/raw.txt of commit $prevcommit (HEAD when the report was written), in the last table."
fi

{
	echo "Command: \`bench/run.sh\` (COUNT=$COUNT BENCHTIME=$BENCHTIME BENCH=$BENCH PROCS=$PROCS): \`go test -run '^\$' -bench $BENCH -benchmem -count $COUNT -benchtime $BENCHTIME\` in bench/$procscmd$turnscmd, took ${took}s."
	echo
	echo "Load: $(cat /proc/loadavg | cut -d' ' -f1-3) (1, 5, 15 min load average at the end of the run, on $(nproc) CPUs shared with other work)."
	echo
	echo "Machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), $(go version | cut -d' ' -f3-), redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p'), embedded etcd $(cd "$here" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3) ($( [ "${LOCKSWAP_BENCH_ETCD_NOFSYNC:-}" = 1 ] && echo "no fsync" || echo "fsync on")), run on $(date -u +%Y-%m-%d)."
	echo
	if grep -q '^BenchmarkLocks/' "$raw"; then
		echo "Compared with: $prevnote"
		echo
	fi
	go run ./report ${previous[@]+"${previous[@]}"} <"$raw"
} >"$latest"

doc="$root/docs/benchmarks.md"
if [ -z "$REPORT" ] && [ -f "$doc" ] && grep -q '<!-- BEGIN GENERATED -->' "$doc"; then
	awk -v f="$latest" '
		/<!-- BEGIN GENERATED -->/ { print; while ((getline l < f) > 0) print l; skip=1; next }
		/<!-- END GENERATED -->/ { skip=0 }
		!skip { print }' "$doc" >"$doc.tmp" && mv "$doc.tmp" "$doc"
	echo "updated $doc" >&2
fi
echo "wrote $latest" >&2
exit "$status"
