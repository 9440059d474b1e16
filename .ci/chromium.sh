#!/usr/bin/env bash
# Installs (once) Debian's headless Chromium and librsvg's rsvg-convert, used by
# the `hpo` CLI tests (the HTML report is opened in Chromium; plots are
# rendered to PNG). Prints the chromium path. Needs root (CI runs as root).
#
#   .ci/chromium.sh
set -euo pipefail
find_chromium() { command -v chromium || command -v chromium-browser || true; }
if [ -z "$(find_chromium)" ] || ! command -v rsvg-convert >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends chromium librsvg2-bin fonts-dejavu-core >&2
fi
find_chromium
