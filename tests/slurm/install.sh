#!/usr/bin/env bash
# Install what the SLURM tier's single-node cluster runs, from Debian's packages (needs root; CI runs as
# root): the controller, the node daemon, the client commands, job accounting (slurmdbd on MariaDB,
# which submitit's sacct calls need) and munge. Nothing is started or enabled here (tests/slurm/cluster.py
# starts its own daemons with their own configuration).
#   bash tests/slurm/install.sh
set -euo pipefail
PKGS=(slurmctld slurmd slurm-client slurmdbd munge mariadb-server)
need=0
for b in slurmctld slurmd sbatch sacct slurmdbd munged mariadbd; do
  command -v "$b" >/dev/null || [[ -x "/usr/sbin/$b" ]] || need=1
done
[[ $need -eq 0 ]] && exit 0
if [[ $(id -u) -ne 0 ]]; then
  echo "SLURM is not installed and this is not root: run as root, or sudo apt-get install -y ${PKGS[*]}" >&2
  exit 1
fi
echo ">> apt-get install ${PKGS[*]}"
apt-get update -qq
# policy-rc.d 101: the packages' scripts must not start the system's own munge/mariadb/slurm services
trap 'rm -f /usr/sbin/policy-rc.d' EXIT
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${PKGS[@]}" >/dev/null
