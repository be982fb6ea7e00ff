#!/bin/sh
# mmdebstrap customize hook: $1 is the finished chroot, before mmdebstrap's own cleanup.
# Everything written here must be byte-identical on every host and every run.
set -eu
root="$1"

# The unprivileged sandbox user. Written directly rather than with useradd, whose shadow
# entry carries the day of creation and whose subuid bookkeeping we do not want. (An upstream
# base, see Dockerfile.upstream, may already have it.)
if ! grep -q '^agent:' "$root/etc/passwd"; then
    echo 'agent:x:10001:10001:ISPM sandbox agent:/home/agent:/usr/sbin/nologin' >> "$root/etc/passwd"
    echo 'agent:x:10001:' >> "$root/etc/group"
    # Last-change day as the passwd package writes it for system users: from SOURCE_DATE_EPOCH.
    echo "agent:*:$((SOURCE_DATE_EPOCH / 86400)):0:99999:7:::" >> "$root/etc/shadow"
    echo 'agent:*::' >> "$root/etc/gshadow"
fi
install -d -m 0755 -o 10001 -g 10001 "$root/home/agent"

# The mount points of the agent contract, so the engine need not create them.
for d in task world docs output; do
    install -d -m 0755 "$root/$d"
done

install -m 0755 "$ISPM_SQL_TOOL" "$root/usr/local/bin/ispm-sql"

# Host-specific files copied in by mmdebstrap: Docker provides its own at run time. (Inside a
# `docker build` they are the engine's bind mounts, which are never committed to the image.)
if [ -z "${ISPM_DOCKER_BUILD:-}" ]; then
    rm -f "$root/etc/resolv.conf" "$root/etc/hostname"
fi
# Backup copies written by the passwd tools and the debconf/apt caches are noise.
rm -f "$root/etc/passwd-" "$root/etc/group-" "$root/etc/shadow-" "$root/etc/gshadow-"
rm -f "$root/var/cache/debconf/"*-old
rm -rf "$root/var/cache/apt/"*.bin "$root/var/lib/apt/lists/"*

# No setuid or setgid file (su, mount, passwd, chsh, unix_chkpwd, ...): the agent runs as an unprivileged user with
# no capabilities and NoNewPrivs, so they gain it nothing, but they are attack surface it does not need (CIS Docker
# Benchmark 4.8). -xdev: the hook may see the host's /proc and /sys mounted in the chroot; never touch those.
find "$root" -xdev \( -type f -o -type d \) -perm /6000 -exec chmod ug-s {} +

# The image never reaches a package mirror (the sandbox has no network), and the host's apt
# sources name the host's mirror: keep them out of the image.
rm -f "$root/etc/apt/sources.list" "$root/etc/apt/sources.list.d/"*
