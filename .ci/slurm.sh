#!/usr/bin/env bash
# A one-node Slurm cluster on this machine for the Slurm tests: installs
# Debian's packages if missing, writes /etc/slurm/slurm.conf from
# .ci/slurm.conf.in, starts munged, slurmctld and slurmd as daemons (no
# systemd) and waits until the node is idle. Idempotent: a cluster already
# up with this configuration is reused. Runs as root, as slurmd does on
# real clusters. Prints nothing on stdout but the node's name.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'slurm.sh: %s\n' "$*" >&2; }

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v munged >/dev/null || ! command -v sbatch >/dev/null; then
    log "installing slurmctld, slurmd, slurm-client and munge"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge >&2 \
        || { apt-get update >&2 && apt-get install -y --no-install-recommends \
            slurmctld slurmd slurm-client munge >&2; }
fi

host="$(hostname -s)"
state="${HPO_SLURM_STATE:-/var/lib/hpo-slurm}"
# What the node offers: its memory less 1 GiB for the daemons and the tests.
memory=$(( $(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo) - 1024 ))
conf=/etc/slurm/slurm.conf
marker="# hpo-ci: written by .ci/slurm.sh"

mkdir -p /etc/slurm "$state/slurmctld" "$state/slurmd"
wanted="$(sed -e "s|@HOST@|$host|g" -e "s|@STATE@|$state|g" -e "s|@MEMORY@|$memory|g" \
    .ci/slurm.conf.in)"
if [[ -e $conf ]] && ! grep -qF "$marker" "$conf"; then
    log "$conf exists and was not written by this script; not touching it"
    exit 1
fi
changed=0
if [[ ! -e $conf ]] || [[ "$(cat "$conf")" != "$wanted" ]]; then
    printf '%s\n' "$wanted" > "$conf"
    changed=1
fi
# The GPU-less node needs no gres.conf, and cgroup.conf is unused.

running() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# munge: the key comes with the package; the daemon runs as user munge.
if ! pgrep -x munged >/dev/null; then
    [[ -s /etc/munge/munge.key ]] || { mungekey --create >&2 || /usr/sbin/create-munge-key -f >&2; }
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge /etc/munge/munge.key
    chmod 0755 /run/munge
    log "starting munged"
    runuser -u munge -- /usr/sbin/munged
fi

if (( changed )); then
    for daemon in slurmd slurmctld; do
        if running "$state/$daemon.pid"; then
            log "configuration changed: stopping $daemon"
            kill "$(cat "$state/$daemon.pid")"
            for _ in $(seq 50); do running "$state/$daemon.pid" || break; sleep 0.1; done
        fi
    done
fi
if ! running "$state/slurmctld.pid"; then
    log "starting slurmctld"
    /usr/sbin/slurmctld
fi
if ! running "$state/slurmd.pid"; then
    log "starting slurmd"
    /usr/sbin/slurmd
fi

# Up when the node answers idle (or busy with jobs from an earlier run).
for _ in $(seq 120); do
    node_state="$(sinfo -h -n "$host" -o '%t' 2>/dev/null || true)"
    case "$node_state" in
        idle|mix|alloc) echo "$host"; exit 0 ;;
        down*|drain*) scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true ;;
    esac
    sleep 0.5
done
log "the node did not come up within 60 s (state: ${node_state:-no answer}); see $state/*.log"
exit 1
