#!/bin/sh
# Builds libattn4jtiles.so (tiles.c, the flash kernel's native tile math) into DIR, the module's classes
# directory, so that the jar carries it: build.sh DIR JAVA_HOME. Linux x86-64 with gcc only; elsewhere it says
# why not and exits 0, and attn4j uses its Java tile math (the same results, slower).
set -e
out="$1/org/attn4j/ops/native/linux-x86_64"
java_home="$2"
here="$(cd "$(dirname "$0")" && pwd)"
if [ "$(uname -s)" != Linux ] || [ "$(uname -m)" != x86_64 ]; then
    echo "attn4j native tile math: not built ($(uname -s) $(uname -m); it is for Linux x86-64): the Java tile math is used"
    exit 0
fi
if ! command -v gcc >/dev/null 2>&1; then
    echo "attn4j native tile math: not built (no gcc on the PATH): the Java tile math is used"
    exit 0
fi
mkdir -p "$out"
# No -march: the AVX-512 functions carry their own target attribute, and the library checks the CPU at load.
if ! gcc -O3 -std=gnu11 -Wall -Wextra -Wno-unused-parameter -shared -fPIC -fvisibility=default \
    -I"$java_home/include" -I"$java_home/include/linux" \
    -o "$out/libattn4jtiles.so" "$here/tiles.c" -lm; then
    rm -f "$out/libattn4jtiles.so"
    echo "attn4j native tile math: not built (gcc failed, see above): the Java tile math is used"
    exit 0
fi
echo "attn4j native tile math: built $out/libattn4jtiles.so"
