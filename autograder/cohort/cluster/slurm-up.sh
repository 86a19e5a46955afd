#!/usr/bin/env bash
# Start a single-node Slurm on this machine, for the tests and for trying `autograder batch --executor
# slurm` without a cluster:
#
#     autograder/cohort/cluster/slurm-up.sh STATE_DIR      # prints the line to eval: export SLURM_CONF=...
#     autograder/cohort/cluster/slurm-down.sh STATE_DIR
#
# Needs root (the daemons run as root) and, where Slurm or munge is missing, apt-get: Debian's slurmctld,
# slurmd, slurm-client and munge are installed then. No systemd is needed: munged, slurmctld and slurmd run
# in the foreground under setsid, their PIDs kept in STATE_DIR/pids for slurm-down.sh. Everything else
# (configuration, state, spool, logs) lives in STATE_DIR. The cluster has no accounting database: put
# autograder/cohort/cluster/bin first on PATH, where `sacct` answers from `squeue` (submitit polls sacct).
# Exit status 3: Slurm cannot be started here (not root, or no apt-get to install it); the message says why.
set -euo pipefail

state=${1:?usage: slurm-up.sh STATE_DIR}
if [ "$(id -u)" != 0 ]; then
  echo "cannot start Slurm: the daemons need root, and this runs as $(id -un)" >&2; exit 3
fi
mkdir -p "$state"
state=$(cd "$state" && pwd)
missing=()
for pair in slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client munged:munge; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair##*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || { echo "cannot start Slurm: ${missing[*]} missing and no apt-get to install them" >&2; exit 3; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 || \
    { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1; } || \
    { echo "cannot start Slurm: apt-get could not install ${missing[*]}" >&2; exit 3; }
fi

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
mkdir -p "$state/spool" "$state/statesave" "$state/log"
: > "$state/pids"

# munge: a key and a socket of this cluster's own, so that it never disturbs a munged already running. munged
# runs as the munge user, who may not be able to reach STATE_DIR (e.g. inside a private temporary folder): its
# files go to a folder of their own, named in STATE_DIR/munge-dir for slurm-down.sh.
munge_dir=$(mktemp -d "$( [ -d /run ] && echo /run || echo /tmp )/llmsys-munge.XXXXXX")
echo "$munge_dir" > "$state/munge-dir"
chown munge:munge "$munge_dir" && chmod 700 "$munge_dir"
dd if=/dev/urandom of="$munge_dir/munge.key" bs=1024 count=1 status=none
chown munge:munge "$munge_dir/munge.key" && chmod 400 "$munge_dir/munge.key"
socket="$munge_dir/munge.socket"
setsid setpriv --reuid=munge --regid=munge --init-groups munged -F --force --key-file="$munge_dir/munge.key" \
  --socket="$socket" --pid-file="$munge_dir/munged.pid" --seed-file="$munge_dir/munge.seed" \
  --log-file="$munge_dir/munged.log" </dev/null >>"$state/log/munged.out" 2>&1 &
echo "munged $!" >> "$state/pids"

cpus=$(nproc)
memory=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
host=$(hostname -s)
cat > "$state/slurm.conf" <<CONF
ClusterName=llmsys
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# A requeued job waits until its first run's credential expires: 10 s here (the default is 120 s).
AuthInfo=socket=$socket,cred_expire=10
StateSaveLocation=$state/statesave
SlurmdSpoolDir=$state/spool/%n
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# The main scheduler and backfill every 2 s (60 s and 30 s by default): a requeued job, held until its
# credential expires, starts a couple of seconds after that rather than at the next 30 s backfill pass.
SchedulerParameters=batch_sched_delay=0,sched_interval=2,bf_interval=2
KillWait=5
MinJobAge=3600
ReturnToService=2
MpiDefault=none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=cpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$state/slurm.conf"

# munged must answer before the Slurm daemons authenticate through it.
fail() { echo "$1; logs in $state/log" >&2; tail -n 20 "$state/log/"* "$munge_dir/munged.log" >&2 2>/dev/null; exit 1; }
deadline=$((SECONDS + 30))
until munge -n -S "$socket" </dev/null 2>/dev/null | unmunge -S "$socket" >/dev/null 2>&1; do
  [ $SECONDS -lt $deadline ] || fail "munged did not answer in 30 s"
  sleep 0.1
done
setsid slurmctld -D -i -f "$SLURM_CONF" </dev/null >>"$state/log/slurmctld.out" 2>&1 &
echo "slurmctld $!" >> "$state/pids"
setsid slurmd -D -f "$SLURM_CONF" </dev/null >>"$state/log/slurmd.out" 2>&1 &
echo "slurmd $!" >> "$state/pids"

deadline=$((SECONDS + 60))
until timeout 10 sinfo -h -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'; do
  [ $SECONDS -lt $deadline ] || fail "Slurm did not come up in 60 s"
  sleep 0.2
done
echo "export SLURM_CONF=$SLURM_CONF"
