#!/usr/bin/env bash
# Bundle the Synapse server's Python packages into the .vsix (run by `npm run package`).
#
#   scripts/bundle-server.sh            builds ../ as a wheel, installs it with its locked
#                                       runtime dependencies into bundled/libs/
#
# Layout (what src/launch.ts reads):
#   bundled/libs/common/       top-level packages identical for every Python below
#   bundled/libs/cp311/ ...    the rest (compiled wheels: pydantic-core, jiter, rpds-py, cffi,
#                              tree-sitter), one directory per CPython minor version
#   bundled/libs/manifest.json platform, Python versions, server version, protocol version
# The extension runs `python -m synapse_lsp` with PYTHONPATH=cp3XX:common for the Python it finds.
#
# Target: linux-x64 (manylinux2014 = glibc >= 2.17). SYNAPSE_BUNDLE_PYTHONS picks the CPython
# versions (default "3.11 3.12 3.13"); wheels only (--only-binary), versions from requirements.lock.
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENT=$PWD
ROOT=$(cd .. && pwd)
PYTHONS=${SYNAPSE_BUNDLE_PYTHONS:-3.11 3.12 3.13}
PLATFORM=manylinux2014_x86_64
OUT=$CLIENT/bundled/libs
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

UV=""
for c in "$ROOT/.venv/bin/uv" "$(command -v uv || true)"; do
  [ -n "$c" ] && [ -x "$c" ] && { UV=$c; break; }
done
PY=$ROOT/.venv/bin/python
[ -x "$PY" ] || PY=$(command -v python3)

# 1. The wheel (hatchling from PyPI).
if [ -n "$UV" ]; then
  "$UV" build -q --wheel -o "$WORK/dist" "$ROOT"
else
  "$PY" -m pip wheel -q --no-deps -w "$WORK/dist" "$ROOT"
fi
WHEEL=$(ls "$WORK"/dist/synapse_lsp-*.whl)

# 2. Its runtime dependencies, per Python version, as manylinux wheels only.
for v in $PYTHONS; do
  tag=cp${v/./}
  if [ -n "$UV" ]; then
    VIRTUAL_ENV= "$UV" pip install -q --target "$WORK/$tag" --python-platform x86_64-manylinux2014 \
      --python-version "$v" --only-binary :all: --no-compile -c "$ROOT/requirements.lock" "$WHEEL"
  else
    "$PY" -m pip install -q --disable-pip-version-check --target "$WORK/$tag" --platform "$PLATFORM" \
      --python-version "$v" --implementation cp --only-binary=:all: --no-compile \
      -c "$ROOT/requirements.lock" "$WHEEL"
  fi
  rm -rf "$WORK/$tag/bin"
  find "$WORK/$tag" -name __pycache__ -prune -exec rm -rf {} +
done

# 3. Shared top-level entries into common/, the rest per version.
rm -rf "$OUT"
mkdir -p "$OUT"
"$PY" - "$WORK" "$OUT" "$ROOT" $PYTHONS <<'PYEOF'
import filecmp, json, re, shutil, sys
from pathlib import Path

work, out, root = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
tags = ["cp" + v.replace(".", "") for v in sys.argv[4:]]

def same(a: Path, b: Path) -> bool:
    if a.is_file() != b.is_file():
        return False
    if a.is_file():
        return filecmp.cmp(a, b, shallow=False)
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    return not mismatch and not errors and all(same(a / d, b / d) for d in cmp.common_dirs)

first = work / tags[0]
names = sorted(p.name for p in first.iterdir())
common = [n for n in names if all((work / t / n).exists() and same(first / n, work / t / n) for t in tags[1:])]
(out / "common").mkdir()
for n in common:
    shutil.move(str(first / n), out / "common" / n)
    for t in tags[1:]:
        p = work / t / n
        shutil.rmtree(p) if p.is_dir() else p.unlink()
for t in tags:
    shutil.move(str(work / t), out / t)
protocol = int(re.search(r"^PROTOCOL_VERSION = (\d+)", (root / "synapse_lsp/lsp/names.py").read_text(), re.M).group(1))
version = re.search(r'^version = "([^"]+)"', (root / "pyproject.toml").read_text(), re.M).group(1)
manifest = {"platform": "linux-x64", "glibc": "2.17", "pythons": tags, "synapseVersion": version, "protocolVersion": protocol}
(out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
print(f"bundled/libs: common {len(common)} entries; per version: {', '.join(tags)}")
PYEOF
du -sh "$OUT" | sed 's/^/bundled server: /'
