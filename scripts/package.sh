#!/usr/bin/env bash
# Builds the .deb and the .rpm from this checkout: a Release build with Debian's hardening
# flags (dpkg-buildflags) in build-pkg/, then CPack. The packages land in build-pkg/packages/.
#   scripts/package.sh [--no-deps]
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${1:-}" = "--no-deps" ] || bash scripts/install-deps.sh

export CFLAGS="$(dpkg-buildflags --get CFLAGS)"
export CXXFLAGS="$(dpkg-buildflags --get CXXFLAGS) $(dpkg-buildflags --get CPPFLAGS)"
export LDFLAGS="$(dpkg-buildflags --get LDFLAGS)"
# Only what the packages hold is built: CPack's install step must not pull in the tests.
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build-pkg -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON \
  "${launcher[@]}" >/dev/null
cmake --build build-pkg -j "$(nproc)" --target samsad samsactl samsa_package_files
rm -rf build-pkg/packages
(cd build-pkg && cpack -G "DEB;RPM" -B "$PWD/packages" >/dev/null)
rm -rf build-pkg/packages/_CPack_Packages
ls -1 build-pkg/packages/*.deb build-pkg/packages/*.rpm
