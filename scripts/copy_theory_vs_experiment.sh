#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Theory next to experiment for the copy task: runs copy_task (Adam, both initialisations) and
# copy_theory on the same (attention, L, V, kappa, sw2, sg2) and overlays the theory branches on
# the measured c_G and training MSE (figures/*.png in the output folder).
#   scripts/copy_theory_vs_experiment.sh [OUT_DIR] [EXPERIMENT.toml] [THEORY.toml]
# PLOT_ONLY=1 redraws the figures from OUT_DIR/theory and OUT_DIR/experiment without running.
# The two configs must agree on attention, L, V, kappa, sw2, sg2 (the defaults do). Coupled through
# the results.csv files only (columns looked up by name). Needs gnuplot.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PHASELAB_BUILD:-$root/build}
phaselab=${PHASELAB:-$build/driver/phaselab}
out=${1:-$root/runs/copy_theory_vs_experiment-$(date +%Y%m%d-%H%M%S)}
exp_cfg=${2:-$root/configs/copy_task_for_theory.toml}
th_cfg=${3:-$root/configs/copy_theory_vs_experiment.toml}

if [ "${PLOT_ONLY:-0}" != 1 ]; then
  "$phaselab" run "$th_cfg" --out "$out/theory" --quiet
  "$phaselab" run "$exp_cfg" --out "$out/experiment" --quiet
fi
mkdir -p "$out/figures"

# pick FILE FILTER COLS: rows of a CSV whose columns match FILTER ("k=v,k=v"; a missing column
# matches anything), printing COLS ("x,y") space-separated; rows with an empty or missing column in
# COLS are skipped.
pick() {
  awk -F, -v filt="$2" -v cols="$3" '
    { sub(/\r$/, "") }
    NR == 1 { for (i = 1; i <= NF; ++i) h[$i] = i; nf = split(filt, f, ","); nc = split(cols, c, ","); next }
    { ok = 1
      for (k = 1; k <= nf; ++k) { split(f[k], kv, "="); if ((kv[1] in h) && $(h[kv[1]]) != kv[2]) ok = 0 }
      if (!ok) next
      line = ""
      for (k = 1; k <= nc; ++k) { if (!(c[k] in h)) next; v = $(h[c[k]]); if (v == "") next; line = line (k > 1 ? " " : "") v }
      print line }' "$1"
}
# distinct values of column COL in FILE
values() { awk -F, -v col="$2" '{ sub(/\r$/, "") } NR == 1 { for (i = 1; i <= NF; ++i) if ($i == col) c = i; next } c { print $c }' "$1" | sort -u; }
# a scalar key of a config file (key = value), for the figure titles
key() { awk -F= -v k="$2" '{ gsub(/[ \t"]/, "", $1) } $1 == k { gsub(/[ \t"]/, "", $2); print $2; exit }' "$1"; }

th="$out/theory/results.csv"
ex="$out/experiment/results.csv"
L=$(key "$th_cfg" L)
V=$(key "$th_cfg" V)
dat="$out/figures/data"
mkdir -p "$dat"
for att in $(values "$th" attention); do
  # linear attention has the (W, A) -> (-W, -A) symmetry: compare |c_G|
  cgcol=cG
  [ "$att" = linear ] && cgcol=abs_cG
  for y in $cgcol train_mse; do
    plots=()
    var=0
    # objective and rest_logits (softmax reduced action) may be swept: one set of theory curves each
    rests=$(values "$th" rest_logits)
    [ "$att" = linear ] && rests=$(echo "$rests" | head -1)
    for ob in $(values "$th" objective | grep . || echo any); do
    for rl in ${rests:-any}; do
      rf="" tag=""
      if [ "$ob" != any ]; then rf=",objective=$ob"; tag=" $ob"; fi
      if [ "$rl" != any ]; then rf="$rf,rest_logits=$rl"; [ "$att" = softmax ] && tag="$tag, rest $rl"; fi
      rl="${ob}_$rl"
      var=$((var + 1))  # one dash type per theory variant
      for br in $(values "$th" branch); do
        f="$dat/th_${att}_${y}_${br}_${rl}.dat"
        pick "$th" "attention=$att,branch=$br$rf" "P,$y" | sort -g > "$f"
        if [ -s "$f" ]; then plots+=("'$f' using 1:2 with lines lw 2 dt $var title 'theory$tag: $br'"); fi
      done
      f="$dat/th_${att}_${y}_global_${rl}.dat"
      pick "$th" "attention=$att,is_global=1$rf" "P,$y" | sort -g > "$f"
      plots+=("'$f' using 1:2 with lines lw 1 dt 2 title 'theory$tag: global'")
      if [ "$y" = train_mse ]; then
        f="$dat/th_${att}_mse_exact_${rl}.dat"
        pick "$th" "attention=$att,is_global=1$rf" "P,train_mse_exact" | sort -g > "$f"
        if [ -s "$f" ]; then
          plots+=("'$f' using 1:2 with lines lw 1 lc rgb 'gray' title 'theory$tag: global, exact finite-P read-out'")
        fi
      fi
    done
    done
    for init in $(values "$ex" init); do
      pick "$ex" "attention=$att,init=$init,method=adam" "P,$y" | sort -g > "$dat/ex_${att}_${y}_${init}.dat"
      if [ -s "$dat/ex_${att}_${y}_${init}.dat" ]; then
        plots+=("'$dat/ex_${att}_${y}_${init}.dat' using 1:2 with points pt 7 ps 1 title 'Adam, init $init'")
      fi
    done
    list=$(IFS=,; echo "${plots[*]}")
    gnuplot <<GP
set terminal pngcairo size 900,600 noenhanced
set output '$out/figures/${att}_${y}_theory_vs_adam.png'
set title '$att attention, L=$L V=$V: $y vs P (theory branches over Adam runs)'
set logscale x
set xlabel 'P'
set ylabel '$y'
set key outside below
set grid
plot $list
GP
  done
done
echo "theory:     $out/theory (transitions.csv: P*, spinodal, order)"
echo "experiment: $out/experiment"
echo "figures:    $out/figures/"
