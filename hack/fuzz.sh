#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each, all of them even
# when one fails, and prints one line per target:
#
#   passed   <package> <target>
#   FAILED   <package> <target>: <failing input file>
#   timeout  <package> <target>: engine timeout without an input
#   skipped  <package> <target>: <reason the target gave>
#
# "timeout" is Go's fuzzing engine running out of time while it minimizes
# an input that only widened coverage: it ends with "context deadline
# exceeded" and writes no input, so there is nothing to reproduce and it
# is not a failure. Any other non-zero `go test` (a failing input, a
# failing seed corpus entry, a build error) is a failure. The exit status
# is non-zero exactly when some target failed.
#
# A failing input stays where the engine wrote it, under the package's
# testdata/fuzz/<target>/, so `go test -run <target>/<file>` replays it;
# commit it as a regression once the bug is fixed.
#
# Environment: GO (default go), FUZZTIME (default 10s), FUZZ_RUN (regexp
# of target names, default every target), FUZZ_LOGS (directory for the
# per-target logs, default a temporary one that is removed unless a
# target failed).
set -uo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.." || exit 1

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
FUZZ_RUN=${FUZZ_RUN:-.}
module=$("$GO" list -m) || exit 1

keep_logs=${FUZZ_LOGS:+yes}
logs=${FUZZ_LOGS:-$(mktemp -d)}
mkdir -p "$logs"

# The targets: top-level "func FuzzX(f *testing.F)" in the test files Go
# builds for this platform. This needs no compiling, unlike
# `go test -list`, so the list costs nothing before the first run.
if ! listing=$("$GO" list -f '{{$d := .Dir}}{{range .TestGoFiles}}{{$.ImportPath}} {{$d}}/{{.}}
{{end}}{{range .XTestGoFiles}}{{$.ImportPath}} {{$d}}/{{.}}
{{end}}' ./...); then
	echo "fuzz: listing the packages failed" >&2
	exit 1
fi
targets=()
while read -r pkg file; do
	[[ -n $file ]] || continue
	for n in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*\*testing\.F) {$/\1/p' "$file"); do
		targets+=("$pkg $n")
	done
done <<<"$listing"

start=$SECONDS
failed=0
ran=0
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	[[ $name =~ $FUZZ_RUN ]] || continue
	ran=$((ran + 1))
	rel=${pkg#"$module"}
	rel=${rel#/}
	dir=${rel:-.}
	log=$logs/${rel//\//_}_$name.log
	corpus=$dir/testdata/fuzz/$name
	before=$(ls "$corpus" 2>/dev/null)

	t0=$SECONDS
	"$GO" test -v -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" "$pkg" >"$log" 2>&1
	rc=$?
	took="($((SECONDS - t0))s)"

	written=$(sed -n 's/^ *Failing input written to //p' "$log" | head -n1)
	new=$(comm -13 <(echo "$before") <(ls "$corpus" 2>/dev/null) | head -n1)
	seed=$(sed -n 's/^ *failure while testing seed corpus entry: //p' "$log" | head -n1)
	if [[ $rc -eq 0 ]]; then
		if reason=$(grep -A1 -E "^--- SKIP: $name \(" "$log"); then
			echo "skipped  $pkg $name: $(echo "$reason" | sed -n '2{s/^ *//;p}') $took"
		else
			echo "passed   $pkg $name $took"
		fi
		continue
	fi
	if [[ -n $written ]]; then
		input=$dir/$written
	elif [[ -n $new ]]; then
		input=$corpus/$new
	elif [[ -n $seed ]]; then
		# A checked-in file, or an f.Add entry (seed#N) with no file.
		input=$dir/testdata/fuzz/$seed
		[[ -e $input ]] || input="seed corpus entry $seed"
	elif grep -q 'context deadline exceeded' "$log"; then
		echo "timeout  $pkg $name: engine timeout without an input $took"
		continue
	else
		input="no input (see the log below)"
	fi
	failed=$((failed + 1))
	echo "FAILED   $pkg $name: $input $took"
	sed 's/^/    | /' "$log" | tail -n 40
	keep_logs=yes
done

echo "fuzz: $ran targets, $failed failed, $((SECONDS - start))s (FUZZTIME=$FUZZTIME)"
if [[ $keep_logs == yes ]]; then
	echo "fuzz: logs in $logs"
else
	rm -rf "$logs"
fi
if [[ $ran -eq 0 ]]; then
	echo "fuzz: no fuzz target matches FUZZ_RUN=$FUZZ_RUN" >&2
	exit 1
fi
[[ $failed -eq 0 ]]
