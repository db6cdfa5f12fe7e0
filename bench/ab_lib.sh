# Sourced by bench/ab_*.sh: run bench/platform.py with the same arguments
# for two builds, alternated BEFORE, AFTER, BEFORE, AFTER... ($rounds
# rounds), so that a shared machine's load falls on both alike. Each run's
# output goes to $out/before.R or $out/after.R; a failed run is shown and
# ends the script. Needs $before, $after, $rounds, $top and $out.
ab_alternate() {
	r=1
	while [ "$r" -le "$rounds" ]; do
		for v in before after; do
			eval bin=\$$v
			/usr/bin/python3 "$top/bench/platform.py" --bin "$bin" "$@" \
			    >"$out/$v.$r" 2>&1 || { cat "$out/$v.$r" >&2; exit 1; }
		done
		r=$((r + 1))
	done
}
