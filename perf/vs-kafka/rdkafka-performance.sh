#!/usr/bin/env bash
# Builds librdkafka's own load generator, examples/rdkafka_performance, from Debian's source
# package of the installed librdkafka (the independent tool samsa-perf is checked against), and
# prints its path. Everything happens under ~/.cache/samsa (SAMSA_CACHE), never in the tree and
# never in the system's apt state: a private deb-src list and private package lists.
set -euo pipefail

SAMSA_CACHE=${SAMSA_CACHE:-$HOME/.cache/samsa}
ver=$(dpkg-query -W -f='${Version}' librdkafka-dev 2>/dev/null) ||
  { echo "rdkafka-performance.sh: librdkafka-dev is not installed" >&2; exit 1; }
dir=$SAMSA_CACHE/rdkafka-performance-$ver
bin=$dir/rdkafka_performance
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
command -v dpkg-source >/dev/null || { echo "rdkafka-performance.sh: dpkg-dev is needed" >&2; exit 1; }

work=$dir/work
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
} >"$work/sources.list"
[ -s "$work/sources.list" ] || echo "deb-src http://deb.debian.org/debian bookworm main" >"$work/sources.list"

apt_opts=(-o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o Dir::State::Lists="$work/lists" -o Dir::Cache::Archives="$work/archives"
  -o Debug::NoLocking=1)
echo "rdkafka-performance.sh: fetching librdkafka $ver sources from Debian" >&2
apt-get "${apt_opts[@]}" -qq update >&2
(cd "$work" && apt-get "${apt_opts[@]}" -qq source "librdkafka=$ver" >&2)
src=$(find "$work" -maxdepth 1 -type d -name 'librdkafka-*' | head -1)
[ -n "$src" ] || { echo "rdkafka-performance.sh: apt-get source gave no tree" >&2; exit 1; }

echo "rdkafka-performance.sh: building rdkafka_performance (a few minutes)" >&2
(cd "$src" && ./configure --disable-ssl --disable-gssapi >"$work/configure.log" 2>&1 &&
  make -j2 libs >"$work/make.log" 2>&1 &&
  make -C examples rdkafka_performance >>"$work/make.log" 2>&1) ||
  { echo "rdkafka-performance.sh: build failed, see $work/*.log" >&2; exit 1; }
cp "$src/examples/rdkafka_performance" "$bin.tmp"
mv "$bin.tmp" "$bin"
echo "$bin"
