# shellcheck shell=bash
# Time-to-accuracy runs' results, shared by bench/time_to_accuracy.sh (CPU) and bench/gpu/fashion_mnist.sh (GPU):
# reading a side's RESULT line, one report line per run (its values appended to WORK/SIDE.tsv), and the median.
# Sourced; needs WORK (a folder) and TARGET (the accuracy goal).

# field KEY LOG: a RESULT line's value (nan when absent), torus run's and the peers' alike.
field() { awk -v k="$1" '/^RESULT / { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) v = kv[2] } }
                         END { print (v == "") ? "nan" : v }' "$2"; }

# report SIDE RUN LOG: one line per run; time to target, final accuracy and images/s appended to WORK/SIDE.tsv.
report() {
  local t a i
  t="$(field time_to_target_s "$3")"
  a="$(field accuracy "$3")"
  i="$(field images_per_s "$3")"
  printf '%s\t%s\t%s\n' "$t" "$a" "$i" >>"$WORK/$1.tsv"
  awk -v s="$1" -v r="$2" -v t="$t" -v a="$a" -v i="$i" -v g="$TARGET" 'BEGIN {
    printf "%-7s run %d: time to %.1f%%: %s, final accuracy %.2f%%, %s img/s\n", s, r, g * 100,
      (t == "nan") ? "not reached" : t " s", a * 100, i }'
}

# median COLUMN FILE: runs that did not reach the target count as infinitely slow (nan if the median is one).
median() {
  cut -f "$1" "$2" | sed 's/^nan$/1e30/' | sort -g | awk '{ v[NR] = $1 }
    END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print (NR == 0 || m >= 1e29) ? "nan" : m }'
}
