#!/bin/sh
# Builds libattn4jtiles.so (tiles.c, the flash kernel's native tile math) into DIR, the module's classes
# directory, so that the jar carries it: build.sh DIR JAVA_HOME. Linux x86-64 with gcc only. When it cannot, it
# says so in Maven's output as a warning, writes why into DIR (org/attn4j/ops/native/not-built.txt, which
# FlashAttention.tileCode() and its log line quote) and exits 0: attn4j then runs its Java tile math (the same
# results, slower), and on Linux x86-64 NativeTileMathTest fails unless -Dattn4j.allowNoNative=true.
set -e
out="$1/org/attn4j/ops/native/linux-x86_64"
note="$1/org/attn4j/ops/native/not-built.txt"
java_home="$2"
here="$(cd "$(dirname "$0")" && pwd)"

# not_built WHY [MORE...]: no library (none left from an earlier build either), WHY in the note, warnings.
not_built() {
    rm -f "$out/libattn4jtiles.so"
    mkdir -p "$(dirname "$note")"
    printf '%s\n' "$1" > "$note"
    echo "[WARNING] attn4j native tile math NOT built: $1; the jar runs the slower Java tile math"
    shift
    for line in "$@"; do
        echo "[WARNING] $line"
    done
    exit 0
}

if [ "$(uname -s)" != Linux ] || [ "$(uname -m)" != x86_64 ]; then
    not_built "the build ran on $(uname -s) $(uname -m), not Linux x86-64"
fi
tests_fail="The tests of attn4j-ops fail on this host unless -Dattn4j.allowNoNative=true accepts a build without it"
if ! command -v gcc >/dev/null 2>&1; then
    not_built "no gcc on the build's PATH" "$tests_fail"
fi
mkdir -p "$out"
status=0
# No -march: the AVX-512 functions carry their own target attribute, and the library checks the CPU at load.
gcc -O3 -std=gnu11 -Wall -Wextra -Wno-unused-parameter -shared -fPIC -fvisibility=default \
    -I"$java_home/include" -I"$java_home/include/linux" \
    -o "$out/libattn4jtiles.so" "$here/tiles.c" -lm || status=$?
if [ "$status" -ne 0 ]; then
    not_built "the build's gcc step failed with exit status $status" "gcc's messages are above" "$tests_fail"
fi
rm -f "$note"
echo "attn4j native tile math: built $out/libattn4jtiles.so"
