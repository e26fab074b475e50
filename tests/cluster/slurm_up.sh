#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for trying the Slurm launchers and for the Slurm test tier
# (tests/test_slurm_cluster.py, docs/clusters.md). Run as root on Debian or Ubuntu:
#
#   bash tests/cluster/slurm_up.sh /tmp/slurm            # munge, MariaDB, slurmdbd, slurmctld, slurmd
#   bash tests/cluster/slurm_up.sh /tmp/slurm --no-accounting   # no slurmdbd: `sacct` fails, as on some clusters
#   export SLURM_CONF=/tmp/slurm/slurm.conf              # what sinfo, sbatch and the launchers read
#   bash tests/cluster/slurm_down.sh /tmp/slurm          # stops every daemon above, by the PIDs in /tmp/slurm/pids
#
# Installs Debian's slurmctld, slurmd, slurm-client, munge (and slurmdbd, mariadb-server) when absent. Everything
# it writes (configs, keys, state, the database, logs) lives in the folder given; nothing under /etc changes. The
# daemons use Slurm's default ports 6817 (slurmctld), 6818 (slurmd), 6819 (slurmdbd); MariaDB listens on 127.0.0.1
# at a free port. The node has this machine's CPUs and memory, in one partition named `cpu`. Exit status 0 once
# `sinfo` shows the node idle, non-zero (with the daemons stopped and the log's tail on stderr) otherwise.
set -euo pipefail
DIR=${1:?usage: slurm_up.sh FOLDER [--no-accounting]}
ACCOUNTING=1
[[ "${2:-}" == "--no-accounting" ]] && ACCOUNTING=0
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
: > "$DIR/pids"

packages=(slurmctld slurmd slurm-client munge)
((ACCOUNTING)) && packages+=(slurmdbd mariadb-server)
missing=()
for p in "${packages[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p"); done
if ((${#missing[@]})); then
  echo "installing ${missing[*]}" >&2
  apt-get update -qq
  # policy-rc.d-less containers would start the packages' own services: the daemons here are started below instead
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

fail() {
  echo "slurm_up: $*" >&2
  for log in "$DIR"/*.log; do [[ -s "$log" ]] && { echo "--- $log" >&2; tail -n 15 "$log" >&2; }; done
  bash "$HERE/slurm_down.sh" "$DIR" >&2 || true
  exit 1
}
started() { echo "$1 $2" >> "$DIR/pids"; }  # name pid, read by slurm_down.sh
wait_for() {  # seconds, description, command...: until the command succeeds, by a deadline
  local deadline=$((SECONDS + $1)) what=$2; shift 2
  until timeout 5 "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "$what did not come up within ${deadline}s of the script's start"
    sleep 0.5
  done
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

NODE=$(hostname -s)
CPUS=$(nproc)
MEM_MB=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
mkdir -p "$DIR/state" "$DIR/spool" "$DIR/munge"

# munge: a fresh key, on munge's default socket (slurmctld's connection to slurmdbd takes no other in 22.05)
MUNGE_SOCKET=/run/munge/munge.socket.2
[[ -S $MUNGE_SOCKET ]] && munge -n >/dev/null 2>&1 && fail "a munged already answers on $MUNGE_SOCKET: stop it first"
mkdir -p /run/munge
dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1 count=1024 status=none
chmod 700 "$DIR/munge"; chmod 400 "$DIR/munge/munge.key"
munged --force --foreground --key-file="$DIR/munge/munge.key" --socket="$MUNGE_SOCKET" \
  --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munged.log" --seed-file="$DIR/munge/munge.seed" > "$DIR/munged.out" 2>&1 &
started munged $!
wait_for 20 munged munge -n

if ((ACCOUNTING)); then
  # MariaDB for slurmdbd: its own data folder, 127.0.0.1 only, a password made here for slurmdbd's user
  DB_PORT=$(free_port)
  DB_PASS=$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
  mariadb-install-db --no-defaults --datadir="$DIR/mysql" --user=root --auth-root-authentication-method=normal \
    --skip-test-db > "$DIR/mariadb-install.log" 2>&1 || fail "mariadb-install-db failed"
  mariadbd --no-defaults --datadir="$DIR/mysql" --user=root --socket="$DIR/mysql.sock" --port="$DB_PORT" \
    --bind-address=127.0.0.1 --pid-file="$DIR/mysql.pid" --log-error="$DIR/mariadb.log" \
    --innodb-buffer-pool-size=64M --innodb-lock-wait-timeout=900 > "$DIR/mariadb.out" 2>&1 &
  started mariadbd $!
  wait_for 60 MariaDB mariadb --no-defaults -S "$DIR/mysql.sock" -u root -e "SELECT 1"
  mariadb --no-defaults -S "$DIR/mysql.sock" -u root -e "CREATE DATABASE slurm_acct_db;
    CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" || fail "MariaDB: could not make slurmdbd's database"
  umask 077  # slurmdbd refuses a slurmdbd.conf that others can read (it holds the database password)
  cat > "$DIR/slurmdbd.conf" <<EOF
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=root
PidFile=$DIR/slurmdbd.pid
LogFile=$DIR/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
  umask 022
  # slurmdbd reads slurmdbd.conf beside the slurm.conf that SLURM_CONF names
  SLURM_CONF="$DIR/slurm.conf" slurmdbd -D > "$DIR/slurmdbd.out" 2>&1 &
  started slurmdbd $!
  wait_for 60 slurmdbd bash -c "exec 3<>/dev/tcp/127.0.0.1/6819"
  ACCT_LINES="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
JobAcctGatherType=jobacct_gather/none"
else
  ACCT_LINES="AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none"
fi

# One node, one partition. linuxproc/task none: no cgroups, so it runs in containers too. A finished job stays
# visible to `squeue -t all` for MinJobAge seconds (the launcher's state source when there is no accounting).
# A requeued job may start again cred_expire + 1 s later (Slurm's default: 120 s; its killed instance's credential
# must have expired, or the launch fails).
cat > "$DIR/slurm.conf" <<EOF
ClusterName=mcq
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/slurmd-%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
KillWait=10
MinJobAge=300
AuthInfo=cred_expire=30
$ACCT_LINES
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=cpu Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$DIR/slurm.conf"
slurmctld -D -i -f "$SLURM_CONF" > "$DIR/slurmctld.out" 2>&1 &
started slurmctld $!
slurmd -D -f "$SLURM_CONF" > "$DIR/slurmd.out" 2>&1 &
started slurmd $!
wait_for 60 "the node (sinfo idle)" bash -c "sinfo -h -N -o %t | grep -qx idle"
echo "slurm cluster up: export SLURM_CONF=$SLURM_CONF (partition cpu, $CPUS CPUs$( ((ACCOUNTING)) && echo ', accounting'))"
