#!/usr/bin/env bash
# Stop the single-node Slurm that slurm-up.sh STATE_DIR started: cancel its jobs first (stopping only the
# daemons would leave job steps running), then end the daemons by the PIDs it kept.
set -uo pipefail

state=${1:?usage: slurm-down.sh STATE_DIR}
[ -f "$state/pids" ] || exit 0
export SLURM_CONF="$state/slurm.conf"

jobs=$(timeout 10 squeue -h -o '%A' 2>/dev/null | sort -u)
if [ -n "$jobs" ]; then
  scancel $jobs 2>/dev/null
  # KillWait=5: a job that ignores SIGTERM is killed after 5 s.
  for _ in $(seq 200); do
    [ -z "$(timeout 10 squeue -h -t RUNNING,COMPLETING,PENDING,CONFIGURING -o '%A' 2>/dev/null)" ] && break
    sleep 0.1
  done
fi

alive() { kill -0 "$1" 2>/dev/null; }
# In reverse order of starting: slurmd, slurmctld, munged.
tac "$state/pids" | while read -r name pid; do
  alive "$pid" || continue
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 100); do alive "$pid" || break; sleep 0.1; done
  alive "$pid" && { echo "$name ($pid) did not stop on SIGTERM: killed" >&2; kill -KILL "$pid" 2>/dev/null; }
done
rm -f "$state/pids"
if [ -f "$state/munge-dir" ]; then
  rm -rf -- "$(cat "$state/munge-dir")"
  rm -f "$state/munge-dir"
fi
exit 0
