#!/bin/bash
# Build the ISPM base rootfs tarball from Debian packages, without any container registry.
#
#   images/base/build.sh OUTPUT.tar [APT_SOURCES_FILE...]
#
# The packages come from the machine's own apt sources: every file named on the command line
# (deb822 *.sources or one-line *.list), or, if none is named, the host's sources.list and
# sources.list.d/*. No mirror host is written anywhere in the repository.
#
# The output is reproducible for the same sources and mirror content: SOURCE_DATE_EPOCH is a
# constant kept next to this script, and the files that differ per host or per run are removed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:?usage: build.sh OUTPUT.tar [APT_SOURCES_FILE...]}"
shift

if [[ $# -eq 0 ]]; then
    # Same discovery rule as runner.sandbox.images.apt_source_files(); keep them in step.
    shopt -s nullglob
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
        [[ -s "$f" ]] && set -- "$@" "$f"
    done
    shopt -u nullglob
fi
if [[ $# -eq 0 ]]; then
    echo "build.sh: no apt sources found on this machine" >&2
    exit 2
fi

# CI runs on a fresh machine as root: fetch the tool if it is missing.
if ! command -v mmdebstrap >/dev/null 2>&1; then
    if [[ $(id -u) -ne 0 ]]; then
        echo "build.sh: mmdebstrap is missing and we are not root; install it with apt-get" >&2
        exit 2
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >&2
fi

SOURCE_DATE_EPOCH="$(tr -d '[:space:]' < "$here/SOURCE_DATE_EPOCH")"
export SOURCE_DATE_EPOCH
export ISPM_SQL_TOOL="$here/ispm-sql"

# python3 (not python3-minimal): the SQL tool needs the sqlite3 and json modules, which live in
# libpython3.11-stdlib. No ca-certificates: nothing inside the sandbox talks TLS. No tini:
# the Docker backend starts every container with --init (the engine's own docker-init), which
# also covers images that outsiders bring.
packages=python3,sqlite3

# The chroot is assembled in a scratch folder that apt's unprivileged _apt user can reach. Where it
# cannot (a 0700 ancestor, as under pytest's tmp_path), apt downloads as root instead and leaves
# root-owned partial/ folders in the rootfs: the output would then depend on where it was built.
# /var/tmp is on disk (unlike a tmpfs /tmp) and world-traversable on every Debian machine.
work="$(mktemp -d "${ISPM_BUILD_TMP:-/var/tmp}/ispm-rootfs.XXXXXX")"
chmod 0755 "$work"
trap 'rm -rf --one-file-system "$work"' EXIT
TMPDIR="$work"
export TMPDIR

mmdebstrap \
    --mode=root \
    --variant=minbase \
    --format=tar \
    --include="$packages" \
    --aptopt='Acquire::Languages "none"' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --customize-hook="$here/customize.sh" \
    bookworm "$out" "$@"
