#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A one-node Slurm on this machine for the tests (Debian's slurm-wlm and munge): munged,
# slurmctld and slurmd with a minimal config in STATE_DIR, every CPU of this machine in one
# partition. `local-cluster.sh start STATE_DIR` prints the environment to use it (SLURM_CONF);
# `local-cluster.sh stop STATE_DIR` stops the daemons it started (by their pid files). Needs root.
# PHASELAB_SLURM_CLUSTER (default phaselab-ci) and PHASELAB_SLURM_PORT (slurmctld's port, default
# 16817; slurmd takes the next) let two such clusters run side by side in separate state folders.
set -euo pipefail
cmd=${1:?usage: local-cluster.sh start|stop STATE_DIR}
state=$(realpath -m "${2:?usage: local-cluster.sh start|stop STATE_DIR}")
stop() {
  for d in slurmd slurmctld munge/munged; do
    [[ -f $state/$d.pid ]] && kill "$(cat "$state/$d.pid")" 2>/dev/null || true
  done
}
if [[ $cmd == stop ]]; then stop; exit 0; fi
mkdir -p "$state"/{spool,ctld,munge,log}
chmod 755 "$state"  # mktemp makes it 0700; munged (its own user) must reach munge/

chown munge: "$state/munge"
chmod 755 "$state/munge"
host=$(hostname -s)
port=${PHASELAB_SLURM_PORT:-16817}
if ! [[ $port =~ ^[0-9]+$ ]] || ((port < 1024 || port > 65534)); then
  echo "local-cluster: PHASELAB_SLURM_PORT must be a port in [1024, 65534], got '$port'" >&2
  exit 2
fi
cpus=$(nproc)
mem=$(awk '/MemTotal/ {print int($2 / 1024 / 2)}' /proc/meminfo)
# munge: its own socket and key in the state folder (no system service touched).
dd if=/dev/urandom bs=1 count=1024 of="$state/munge/munge.key" status=none
chown munge: "$state/munge/munge.key"
chmod 400 "$state/munge/munge.key"
runuser -u munge -- munged --key-file="$state/munge/munge.key" \
  --socket="$state/munge/munge.socket" --pid-file="$state/munge/munged.pid" \
  --log-file="$state/munge/munged.log" --seed-file="$state/munge/seed" --force
cat > "$state/slurm.conf" <<CONF
ClusterName=${PHASELAB_SLURM_CLUSTER:-phaselab-ci}
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$state/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
SlurmctldPort=$port
SlurmdPort=$((port + 1))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=ci Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF=$state/slurm.conf
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 30); do
  if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
    echo "export SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 1
done
echo "local-cluster: slurm did not come up in 30 s; logs in $state/log" >&2
sinfo >&2 || true
tail -n 5 "$state"/log/*.log >&2 || true
stop
exit 1
