#!/usr/bin/env bash
# deps.sh — sourced ON THE GPU MACHINE by build.sh and bench.sh: unpacks the carried .debs
# (scripts/gpu/collect-debs.sh) into $SAL_DEPS (default /tmp/deps), never onto /, once for each set of
# .debs (a warm machine that got another set unpacks it afresh); fixes the two
# CMake configs that name absolute /usr paths (Gloo's imported library, OpenBLAS's include and
# library); and puts the unpacked libraries and CUDA's on LD_LIBRARY_PATH.
DEPS=${SAL_DEPS:-/tmp/deps}
DEBS_STAMP=$(ls .gpu/debs | md5sum | cut -c1-32)
if [ ! -d "$DEPS/usr" ] || [ "$(cat "$DEPS/.debs" 2>/dev/null)" != "$DEBS_STAMP" ]; then
  rm -rf "$DEPS"
  for f in .gpu/debs/*.deb; do dpkg -x "$f" "$DEPS"; done
  echo "$DEBS_STAMP" >"$DEPS/.debs"
  sed -i "s#\"/usr/#\"$DEPS/usr/#g" "$DEPS"/usr/share/cmake/Gloo/GlooTargets-*.cmake
  sed -i "s# /usr/# $DEPS/usr/#g" "$DEPS"/usr/lib/x86_64-linux-gnu/openblas-pthread/cmake/openblas/OpenBLASConfig.cmake
fi
export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu:$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:$DEPS/lib/x86_64-linux-gnu:$DEPS/usr/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
