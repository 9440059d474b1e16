#!/usr/bin/env bash
# Runs a command with a time limit; when the limit passes, prints every
# thread's stack of each process under it (with gdb, when installed) and
# kills them, so that a hung test fails CI with the evidence instead of
# running out its whole time budget in silence.
#
#   .ci/watchdog.sh SECONDS COMMAND [ARGS...]
set -uo pipefail
limit="$1"
shift

"$@" &
child=$!

descendants() {
    local p
    for p in $(pgrep -P "$1"); do
        echo "$p"
        descendants "$p"
    done
}

waited=0
while kill -0 "$child" 2>/dev/null; do
    if [ "$waited" -ge "$limit" ]; then
        echo "watchdog: '$*' still running after ${limit}s; the stacks of its processes follow" >&2
        pids="$(descendants "$child")"
        for p in $pids; do
            echo "watchdog: process $p: $(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null)" >&2
            if command -v gdb >/dev/null 2>&1; then
                gdb -p "$p" -batch -ex "thread apply all bt 30" 2>&1 \
                    | grep -E '^(Thread|#)' >&2
            fi
        done
        kill -9 $pids "$child" 2>/dev/null
        wait "$child" 2>/dev/null
        exit 124
    fi
    sleep 5
    waited=$((waited + 5))
done
wait "$child"
