#!/usr/bin/env bash
# Builds, once, the Debian 12 root the system tests boot with systemd-nspawn: debootstrap
# minbase with systemd and what the tests run inside (kcat, man-db for systemd-analyze verify's
# Documentation= check) plus samsa's runtime libraries, so installing the .deb or .rpm needs no
# network. Cached outside the tree (default ~/.cache/samsa/debootstrap-bookworm) and rebuilt
# only when missing or when the package list below changes. Tests copy it; never boot it.
#   make_root.sh [ROOT]
set -euo pipefail
ROOT=${1:-${SAMSA_NSPAWN_ROOT:-$HOME/.cache/samsa/debootstrap-bookworm}}
MIRROR=${SAMSA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PKGS=systemd,systemd-sysv,dbus,kcat,man-db,procps,iproute2,util-linux,passwd
PKGS+=,liburing2,libsnappy1v5,liblz4-1,libzstd1,zlib1g,libstdc++6,libsystemd0
# samsad links DPDK's libraries (the dpdk network backend).
PKGS+=,librte-eal23,librte-ethdev23,librte-mbuf23,librte-mempool23
# ... and what its dpdk backend loads at run time (the .deb recommends them): the mbuf pool's
# ring driver and the af_packet / af_xdp poll-mode drivers.
PKGS+=,librte-mempool-ring23,librte-net-af-packet23,librte-net-af-xdp23
STAMP=".samsa-root:$PKGS"

mkdir -p "$(dirname "$ROOT")"
exec 9>"$ROOT.lock"
flock 9
if [ -f "$ROOT/.samsa-root" ] && [ "$(cat "$ROOT/.samsa-root")" = "$STAMP" ]; then
  exit 0
fi
tmp="$ROOT.tmp"
rm -rf "$tmp"
echo "make_root: debootstrap bookworm into $ROOT (once; about a minute)" >&2
debootstrap --variant=minbase --include="$PKGS" bookworm "$tmp" "$MIRROR" >"$ROOT.log" 2>&1 || {
  tail -20 "$ROOT.log" >&2
  exit 1
}
# A booted copy must not wait for a console, nor try what a container cannot do.
echo samsa-test >"$tmp/etc/hostname"
ln -sf /dev/null "$tmp/etc/systemd/system/systemd-networkd-wait-online.service"
ln -sf /dev/null "$tmp/etc/systemd/system/getty.target"
ln -sf /dev/null "$tmp/etc/systemd/system/console-getty.service"
rm -f "$tmp/var/cache/apt/archives/"*.deb
echo "$STAMP" >"$tmp/.samsa-root"
rm -rf "$ROOT"
mv "$tmp" "$ROOT"
