#!/usr/bin/env bash
# A single-node SLURM on this machine, for CI and for trying profiles/slurm without a cluster.
#
#   sudo tools/slurm/start-slurm.sh        # then: pytest tests/slurm
#
# Installs the Debian packages (slurm-wlm, munge) if they are missing, writes /etc/slurm/slurm.conf for
# this host from tools/slurm/slurm.conf.in, and starts munged, slurmctld and slurmd in the background
# (no systemd, no cgroups). Daemons talk over loopback only. Idempotent: when the node already answers
# `sinfo` as idle, mixed or allocated it returns at once. It refuses to overwrite a slurm.conf it did not
# write, so it cannot clobber a real cluster's configuration.
#
# No accounting daemon (slurmdbd) runs, so `sacct` fails; Snakemake's SLURM plugin must then query job
# status with squeue (profiles/slurm sets `slurm-status-command: squeue`), which holds only while
# finished jobs stay visible to squeue: MinJobAge (300 s here) >= 3 x the plugin's first status-check delay.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
CONF_DIR=/etc/slurm
CONF="$CONF_DIR/slurm.conf"
MARKER="# written by grpo-probe tools/slurm/start-slurm.sh"
LOG_DIR=/var/log/slurm
WAIT_S="${SLURM_START_WAIT_S:-60}"

die() {
    echo "start-slurm: $*" >&2
    exit 1
}

node_state() {
    # Prints the node's state (idle, mixed, allocated, down*, ...) or nothing when slurmctld is not answering.
    command -v sinfo >/dev/null 2>&1 || return 0
    timeout 10 sinfo --noheader --nodes "$NODE" --format '%T' 2>/dev/null | head -n 1 || true
}

node_ready() {
    case "$(node_state)" in
        idle | mixed | allocated | completing) return 0 ;;
        *) return 1 ;;
    esac
}

[[ "$(id -u)" -eq 0 ]] || die "must run as root (sudo $0)"
NODE="$(hostname -s)"

if node_ready; then
    echo "start-slurm: node $NODE is up ($(node_state)); nothing to do"
    exit 0
fi

# -- packages --------------------------------------------------------------------------------------------
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
    echo "start-slurm: installing slurm-wlm and munge"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi

# -- munge -----------------------------------------------------------------------------------------------
if [[ ! -s /etc/munge/munge.key ]]; then
    mkdir -p /etc/munge
    mungekey --create --keyfile /etc/munge/munge.key
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
mkdir -p /run/munge /var/lib/munge /var/log/munge
chown munge:munge /run/munge /var/lib/munge /var/log/munge
chmod 0755 /run/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    rm -f /run/munge/munge.socket.2 /run/munge/munged.pid
    runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 1 20); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break
        sleep 0.25
    done
    munge -n | unmunge >/dev/null || die "munged did not start (see /var/log/munge/munged.log)"
fi

# -- slurm.conf for this host ----------------------------------------------------------------------------
if [[ -f "$CONF" ]] && ! grep -qF "$MARKER" "$CONF"; then
    die "$CONF exists and was not written by this script; refusing to overwrite it"
fi
if id slurm >/dev/null 2>&1; then SLURM_USER=slurm; else SLURM_USER=root; fi
# slurmd -C reports this machine's topology and memory in slurm.conf syntax (first line).
NODE_LINE="$(slurmd -C | head -n 1)"
[[ "$NODE_LINE" == "NodeName=$NODE "* ]] || die "unexpected 'slurmd -C' output: $NODE_LINE"
mkdir -p "$CONF_DIR" "$LOG_DIR" /var/spool/slurmctld /var/spool/slurmd
chown "$SLURM_USER" "$LOG_DIR" /var/spool/slurmctld
tmp="$(mktemp "$CONF_DIR/.slurm.conf.XXXXXX")"
{
    echo "$MARKER"
    sed -e "s|@NODE@|$NODE|g" -e "s|@SLURM_USER@|$SLURM_USER|g" -e "s|@LOG_DIR@|$LOG_DIR|g" \
        "$HERE/slurm.conf.in"
    echo "$NODE_LINE NodeAddr=127.0.0.1 State=UNKNOWN"
    echo "PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP"
} >"$tmp"
chmod 0644 "$tmp"
mv -f "$tmp" "$CONF"

# -- daemons ---------------------------------------------------------------------------------------------
# Each daemon forks into the background; a stale one (answering nothing) is replaced.
if ! timeout 10 scontrol ping 2>/dev/null | grep -q "is UP"; then
    [[ -f /run/slurmctld.pid ]] && kill "$(cat /run/slurmctld.pid)" 2>/dev/null || true
    slurmctld -i
fi
if [[ -f /run/slurmd.pid ]] && kill -0 "$(cat /run/slurmd.pid)" 2>/dev/null; then
    kill "$(cat /run/slurmd.pid)" 2>/dev/null || true
    sleep 1
fi
slurmd

deadline=$((SECONDS + WAIT_S))
until node_ready; do
    case "$(node_state)" in
        down* | drain* | unknown*) scontrol update NodeName="$NODE" State=RESUME 2>/dev/null || true ;;
    esac
    ((SECONDS < deadline)) || die "node $NODE not idle after ${WAIT_S}s (state '$(node_state)'); see $LOG_DIR"
    sleep 1
done
echo "start-slurm: node $NODE is up ($(node_state))"
sinfo
