#!/usr/bin/env bash
# Stops the cluster tests/cluster/slurm_up.sh FOLDER started: cancels its jobs, then each daemon by the PID it
# recorded in FOLDER/pids (SIGTERM, SIGKILL after 20 s), last started first. The folder is left for its logs.
set -uo pipefail
DIR=${1:?usage: slurm_down.sh FOLDER}
[[ -f "$DIR/pids" ]] || exit 0
if [[ -f "$DIR/slurm.conf" ]]; then  # jobs first: their slurmstepd processes do not belong to slurmd
  export SLURM_CONF="$DIR/slurm.conf"
  if timeout 10 squeue -h >/dev/null 2>&1; then
    scancel --full -p cpu >/dev/null 2>&1
    for ((i = 0; i < 60; i++)); do [[ -z "$(timeout 5 squeue -h 2>/dev/null)" ]] && break; sleep 0.5; done
  fi
fi
tac "$DIR/pids" | while read -r name pid; do
  kill -0 "$pid" 2>/dev/null || continue
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < 80; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  kill -0 "$pid" 2>/dev/null && { echo "slurm_down: $name ($pid) ignored SIGTERM, killed" >&2; kill -KILL "$pid"; }
done
: > "$DIR/pids"
