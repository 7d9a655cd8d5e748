#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/slurm/sweep.sbatch end to end: a 20-point toy sweep as a 3-task array + merge job must
# give the same results.csv and history.csv as one process. Through a real Slurm when one answers
# (`sinfo`; CI starts a one-node cluster with scripts/slurm/local-cluster.sh), else through the
# stand-in sbatch of driver/tests/slurm (the script's logic with Slurm's array variables set).
set -euo pipefail
: "${PHASELAB_EXE:?}" "${PHASELAB_TEST_PLUGINS:?}"
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/phaselab-sbatch-test-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export PHASELAB=$PHASELAB_EXE PHASELAB_PLUGIN_PATH=$PHASELAB_TEST_PLUGINS PHASELAB_GNUPLOT=""
cat >"$tmp/s.toml" <<TOML
plugin = "toy"
[run]
seeds = [0, 1]
[sweep]
n = [4, 16, 64, 256, 1024]
mode = ["sum", "mean"]
[toy]
steps = 3
TOML
"$PHASELAB" run "$tmp/s.toml" --out "$tmp/one" --quiet

if timeout 5 sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed)'; then
  mode="real Slurm ($(sinfo -h -o '%P %D node(s) %c cpus' | head -1))"
  out=$(bash "$root/scripts/slurm/sweep.sbatch" "$tmp/s.toml" "$tmp/sweep" 3 \
    --output="$tmp/slurm-%A_%a.log" --chdir="$tmp")
  echo "$out"
  merge_id=$(awk '{print $1}' <<<"${out##*merge job }")
  for _ in $(seq 240); do  # until the merge job has left the queue
    squeue -h -j "$merge_id" 2>/dev/null | grep -q . || break
    sleep 0.5
  done
  echo "merge job $merge_id done after $SECONDS s"
else
  mode="stand-in sbatch (no Slurm answering)"
  export PATH=$root/driver/tests/slurm:$PATH FAKE_SBATCH_LOG=$tmp/fake.log
  bash "$root/scripts/slurm/sweep.sbatch" "$tmp/s.toml" "$tmp/sweep" 3
fi
echo "sweep.sbatch test through $mode"
ls "$tmp/sweep"
status=0
for f in results.csv history.csv; do
  if cmp "$tmp/one/$f" "$tmp/sweep/$f"; then
    echo "$f: identical to the one-process run"
  else
    status=1
  fi
done
[[ -d $tmp/sweep/shard-0-of-3 && -d $tmp/sweep/shard-2-of-3 ]] || status=1

# A task killed while it was starting (its folder holds run.json saying "running", no results.csv
# yet) must continue when Slurm requeues it: the shard step always passes --resume.
"$PHASELAB" run "$tmp/s.toml" --shard 1/3 --out "$tmp/requeue" --quiet
rm "$tmp/requeue/shard-1-of-3/results.csv" "$tmp/requeue/shard-1-of-3/journal.csv"
sed -i 's/"status": "ok"/"status": "running"/' "$tmp/requeue/shard-1-of-3/run.json"
if SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_COUNT=3 SLURM_CPUS_PER_TASK=1 \
  PHASELAB_SWEEP_STEP=shard bash "$root/scripts/slurm/sweep.sbatch" "$tmp/s.toml" "$tmp/requeue" 3 \
  >"$tmp/requeue.log" 2>&1 && cmp -s "$tmp/sweep/shard-1-of-3/results.csv" \
  "$tmp/requeue/shard-1-of-3/results.csv"; then
  echo "a shard killed at start-up continues on requeue: ok"
else
  echo "a shard killed at start-up did not continue on requeue:"
  cat "$tmp/requeue.log"
  status=1
fi
# `phaselab run --plan --shard N` deals the points as the shards did (the same counts per shard
# as the sweep's shard folders) and runs nothing; with --out of a finished run it prices them.
plan=$("$PHASELAB" run "$tmp/s.toml" --plan --shard 3)
for i in 0 1 2; do
  want=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["points"]))' \
    "$tmp/sweep/shard-$i-of-3/run.json")
  got=$(awk -v s=$i '$1 == s && NF >= 3 {print $2}' <<<"$plan")
  if [[ $got != "$want" ]]; then
    echo "--plan gives shard $i $got points, its folder has $want:"
    echo "$plan"
    status=1
  fi
done
[[ ! -e $tmp/s-plan ]] || status=1
priced=$("$PHASELAB" run "$tmp/s.toml" --plan --shard 3 --out "$tmp/one")
if grep -q 'CPU-s per unit from 20 finished points' <<<"$priced" && grep -q -- '--time=' <<<"$priced"; then
  echo "--plan: shard counts as the shards ran them; priced from the finished run:"
  echo "$priced"
else
  echo "--plan with a finished run did not price the shards:"
  echo "$priced"
  status=1
fi

# scripts/slurm/mpi.sbatch inside its job: through a stand-in srun (one rank: the script's
# arguments, --threads from SLURM_CPUS_PER_TASK and --resume), and through mpirun (one rank per
# node: one here) when Open MPI is installed; both must give the one-process tables, and a second
# start of the finished job (a requeue) must leave them as they are.
mkdir -p "$tmp/bin"
printf '#!/bin/sh\n[ "$1" = --cpu-bind=none ] && shift\nexec "$@"\n' >"$tmp/bin/srun"
chmod +x "$tmp/bin/srun"
launchers=(srun)
command -v mpirun >/dev/null && launchers+=(mpirun)
for l in "${launchers[@]}"; do
  if PATH=$tmp/bin:$PATH SLURM_JOB_ID=1 SLURM_NTASKS=1 SLURM_CPUS_PER_TASK=2 PHASELAB_MPI_LAUNCHER=$l \
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    bash "$root/scripts/slurm/mpi.sbatch" "$tmp/s.toml" "$tmp/mpi-$l" >"$tmp/mpi-$l.log" 2>&1 &&
    cmp -s "$tmp/one/results.csv" "$tmp/mpi-$l/results.csv" &&
    grep -q '"threads": 2' "$tmp/mpi-$l/run.json" &&
    PATH=$tmp/bin:$PATH SLURM_JOB_ID=1 SLURM_CPUS_PER_TASK=2 PHASELAB_MPI_LAUNCHER=$l \
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    bash "$root/scripts/slurm/mpi.sbatch" "$tmp/s.toml" "$tmp/mpi-$l" >>"$tmp/mpi-$l.log" 2>&1 &&
    cmp -s "$tmp/one/results.csv" "$tmp/mpi-$l/results.csv"; then
    echo "mpi.sbatch through $l: identical to the one-process run, and a requeue changes nothing"
  else
    echo "mpi.sbatch through $l failed:"
    cat "$tmp/mpi-$l.log"
    status=1
  fi
done
# On a login node it checks the config and submits itself (the stand-in sbatch runs the job at
# once, through the stand-in srun).
if PATH=$root/driver/tests/slurm:$tmp/bin:$PATH FAKE_SBATCH_LOG=$tmp/fake-mpi.log \
  bash "$root/scripts/slurm/mpi.sbatch" "$tmp/s.toml" "$tmp/mpi-submit" --nodes=4 \
  >"$tmp/mpi-submit.log" 2>&1 && grep -q 'submitted: MPI job' "$tmp/mpi-submit.log" &&
  cmp -s "$tmp/one/results.csv" "$tmp/mpi-submit/results.csv"; then
  echo "mpi.sbatch submits itself: $(cat "$tmp/mpi-submit.log")"
else
  echo "mpi.sbatch did not submit:"
  cat "$tmp/mpi-submit.log"
  status=1
fi
((status == 0)) || { cat "$tmp"/*.log 2>/dev/null | tail -n 40; }
exit $status
