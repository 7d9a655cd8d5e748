#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Theory next to experiment for the copy task: runs copy_task (Adam, both initialisations) and
# copy_theory on the same (attention, L, V, kappa, sw2, sg2) and overlays the theory branches on
# the measured c_G and training MSE with `phaselab plot` (figures/*.png in the output folder, each
# with its .csv of the values drawn, .dat and .gp beside it).
#   scripts/copy_theory_vs_experiment.sh [OUT_DIR] [EXPERIMENT.toml] [THEORY.toml]
# PLOT_ONLY=1 redraws the figures from OUT_DIR/theory and OUT_DIR/experiment without running.
# The two configs must agree on attention, L, V, kappa, sw2, sg2 (the defaults do). Coupled through
# the results.csv files only (columns looked up by name): both configs sweep attention, the theory
# config objective and rest_logits (a column missing is an error naming it; a value not swept only
# leaves its curves out, with a warning). Without gnuplot the figures' data are still written.
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

th="$out/theory"
ex="$out/experiment"
for att in softmax linear; do
  # linear attention has the (W, A) -> (-W, -A) symmetry: compare |c_G|
  cgcol=cG
  [ "$att" = linear ] && cgcol=abs_cG
  # objective and rest_logits (softmax reduced action) are swept: one set of theory curves each,
  # one dash type per set; rest_logits does not enter the linear theory
  rests="prior zero"
  [ "$att" = linear ] && rests=prior
  for y in $cgcol train_mse; do
    series=()
    var=0
    for ob in map marginal; do
      for rl in $rests; do
        var=$((var + 1))
        tag=" $ob"
        [ "$att" = softmax ] && tag="$tag, rest $rl"
        sel="attention=$att,objective=$ob,rest_logits=$rl"
        series+=("$th:x=P:y=$y:where=$sel:group=branch:title=theory$tag: {branch}:style=lines lw 2 dt $var")
        series+=("$th:x=P:y=$y:where=$sel,is_global=1:title=theory$tag: global:style=lines lw 1 dt 2")
        if [ "$y" = train_mse ]; then
          series+=("$th:x=P:y=train_mse_exact:where=$sel,is_global=1:title=theory$tag: global, exact finite-P read-out:style=lines lw 1 dt 1 lc rgb 'gray'")
        fi
      done
    done
    series+=("$ex:x=P:y=$y:where=attention=$att,method=adam:group=init:title=Adam, init {init}:style=points pt 7 ps 1")
    "$phaselab" plot --out "$out/figures/${att}_${y}_theory_vs_adam.png" --logx --ylabel "$y" \
      --title "$att attention, L={param:L} V={param:V}: $y vs P (theory branches over Adam runs)" \
      "${series[@]}"
  done
done
echo "theory:     $out/theory (transition_points.csv: P*, spinodal, order; scaling_fit.csv)"
echo "experiment: $out/experiment"
echo "figures:    $out/figures/ (<figure>.csv: the values drawn)"
