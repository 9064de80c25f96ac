#!/usr/bin/env bash
# `npm run package`: synapse-vscode.vsix for linux-x64 with the server bundled (bundle-server.sh).
#
# vsce's secret scan reads every file: over the ~4,400 files of the bundled third-party
# packages it takes ~2.5 min on a 2-core machine. So our own files are scanned in a first pass
# without the bundle, and the bundle (wheels from PyPI at the locked versions) is packed
# with the scan off.
set -euo pipefail
cd "$(dirname "$0")/.."
VSCE=(npx --no-install vsce package --no-dependencies --allow-missing-repository)
scan=$(mktemp -d)
trap 'rm -rf "$scan"' EXIT
grep -v '^!bundled' .vscodeignore > "$scan/ignore"
"${VSCE[@]}" --ignoreFile "$scan/ignore" --out "$scan/scan.vsix" >/dev/null
bash scripts/bundle-server.sh
"${VSCE[@]}" --target linux-x64 --allow-package-all-secrets --out synapse-vscode.vsix
