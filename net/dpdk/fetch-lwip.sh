#!/usr/bin/env bash
# Puts lwIP's sources, from Debian's source package (with Debian's patches applied), into
# ~/.cache/samsa/lwip (SAMSA_CACHE) and prints that path; the DPDK backend compiles them with
# its own lwipopts.h (Debian's binary liblwip-dev is built for the Hurd: NO_SYS=0, fixed
# options). Everything happens under the cache, never in the tree and never in the system's
# apt state: a private deb-src list and private package lists. Idempotent and quiet.
set -euo pipefail

SAMSA_CACHE=${SAMSA_CACHE:-$HOME/.cache/samsa}
link=$SAMSA_CACHE/lwip
if [ -f "$link/src/core/tcp.c" ]; then
  echo "$link"
  exit 0
fi
command -v dpkg-source >/dev/null || { echo "fetch-lwip.sh: dpkg-dev is needed" >&2; exit 1; }

work=$SAMSA_CACHE/lwip-work
rm -rf "$work"
mkdir -p "$work/lists/partial" "$work/archives/partial"
# The mirrors the machine already uses, as deb-src.
{
  for src in /etc/apt/sources.list.d/*.sources; do
    [ -f "$src" ] || continue
    awk '/^URIs:/{u=$2} /^Suites:/{$1=""; s=$0} /^Components:/{$1=""; c=$0}
         /^$/{if(u!="")for(i=split(s,a," ");i>0;i--)print "deb-src", u, a[i], c; u=""}
         END{if(u!="")for(i=split(s,a," ");i>0;i--)print "deb-src", u, a[i], c}' "$src"
  done
  grep -h '^deb ' /etc/apt/sources.list 2>/dev/null | sed 's/^deb /deb-src /' || true
} | grep -v 'cloud.google\|nodesource' >"$work/sources.list" || true
[ -s "$work/sources.list" ] || echo "deb-src http://deb.debian.org/debian bookworm main" >"$work/sources.list"

apt_opts=(-o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o Dir::State::Lists="$work/lists" -o Dir::Cache::Archives="$work/archives"
  -o Debug::NoLocking=1)
echo "fetch-lwip.sh: fetching lwIP sources from Debian" >&2
apt-get "${apt_opts[@]}" -qq update >&2
(cd "$work" && apt-get "${apt_opts[@]}" -qq source lwip >"$work/source.log" 2>&1) ||
  { echo "fetch-lwip.sh: apt-get source lwip failed, see $work/source.log" >&2; exit 1; }
src=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'lwip-*' | head -1)
[ -n "$src" ] && [ -f "$src/src/core/tcp.c" ] ||
  { echo "fetch-lwip.sh: apt-get source gave no lwIP tree" >&2; exit 1; }
dest=$SAMSA_CACHE/$(basename "$src")
rm -rf "$dest"
mv "$src" "$dest"
ln -sfn "$(basename "$dest")" "$link"
rm -rf "$work"
echo "$link"
