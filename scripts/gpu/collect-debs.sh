#!/usr/bin/env bash
# collect-debs.sh — run HERE (Debian 12, with network to the archive): downloads the .debs the GPU
# machine needs to build Salamander into .gpu/debs/ (ignored by git; carry it to the GPU machine).
# That machine has CUDA, cmake, ninja and a compiler but no apt and no -dev packages. The list is
# the headers we build against plus the runtime libraries our binaries load (from `ldd`), minus what
# every glibc system has. scripts/gpu/build.sh unpacks them into a prefix there.
set -euo pipefail
cd "$(dirname "$0")/../.."

DEV=(libluajit-5.1-dev libzmq3-dev cppzmq-dev libuv1-dev libspdlog-dev libfmt-dev doctest-dev libedit-dev
     libmsgpack-cxx-dev nlohmann-json3-dev libopenblas-dev libopenblas-pthread-dev libgloo-dev libucx-dev
     prometheus-cpp-dev libcivetweb-dev libsentencepiece-dev)
RUNTIME=(libluajit-5.1-2 libluajit-5.1-common libuv1 libzmq5 libspdlog1.10 libfmt9 libedit2 libbsd0 libmd0
         libgloo0 libhiredis0.14 libibverbs1 libnl-3-200 libnl-route-3-200 libopenblas0-pthread libgfortran5
         libsodium23 libpgm-5.3-0 libnorm1 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0
         libcom-err2 libkeyutils1 libucx0 libnuma1 libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0
         libcivetweb1 libsentencepiece0 fortunes fortunes-min)

mkdir -p .gpu/debs
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
cd .gpu/debs
rm -f ./*.deb
apt-get download "${DEV[@]}" "${RUNTIME[@]}" >/dev/null
echo "$(ls ./*.deb | wc -l) packages, $(du -sh . | cut -f1) in .gpu/debs"
