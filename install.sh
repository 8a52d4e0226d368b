#!/usr/bin/env bash
# Install grok, grok-detailed and the example skills into ${PREFIX:-$HOME/.local}/bin.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: ./install.sh [--uninstall] [--help]

Installs from the directory this script lives in:
  grok.py           -> $BIN/grok.py, and $BIN/grok, a launcher that imports it
  grok_detailed.py  -> $BIN/grok-detailed   (if present)
  skills/           -> $BIN/skills/         (shipped files replaced, your own skills kept)
where BIN is ${PREFIX:-$HOME/.local}/bin. Running it again upgrades in place.

Options:
  --uninstall   remove grok, grok-detailed and the shipped skill files (your own skills stay)
  -h, --help    show this help

Environment:
  PREFIX        install prefix (default: $HOME/.local)
EOF
}

die() { echo "install.sh: $*" >&2; exit 1; }

mode=install
for arg in "$@"; do
    case "$arg" in
        -h|--help) usage; exit 0 ;;
        --uninstall) mode=uninstall ;;
        *) echo "install.sh: unknown option: $arg" >&2; usage >&2; exit 2 ;;
    esac
done

# The source dir is where this script really lives (following symlinks), not the cwd.
self=${BASH_SOURCE[0]:-$0}
while [ -L "$self" ]; do
    link=$(readlink "$self")
    case "$link" in /*) self=$link ;; *) self=$(dirname "$self")/$link ;; esac
done
SRC=$(cd "$(dirname "$self")" && pwd -P)
BIN=${PREFIX:-$HOME/.local}/bin
SKILLS=$BIN/skills
# Lists every skill file ever installed, so --uninstall also finds ones renamed since.
MANIFEST=$SKILLS/.grok-installed

# Relative paths of the skill files shipped in $SRC/skills, one a line.
shipped_skills() {
    [ -d "$SRC/skills" ] || return 0
    (cd "$SRC/skills" && find . -type f ! -name '.*' | sed 's|^\./||' | LC_ALL=C sort)
}
manifest_entries() { [ ! -f "$MANIFEST" ] || cat "$MANIFEST"; }

# Copy via a temp file and rename, so a running copy is never overwritten in place.
copy_file() { # src dest mode
    local tmp
    tmp=$(mktemp "$(dirname "$2")/.install.XXXXXX")
    cp "$1" "$tmp"
    chmod "$3" "$tmp"
    mv -f "$tmp" "$2"
}

do_uninstall() {
    local f rel
    rm -f "$BIN"/__pycache__/grok.*.pyc "$BIN"/__pycache__/grok.cpython-*.pyc 2>/dev/null || true
    rmdir "$BIN/__pycache__" 2>/dev/null || true
    for f in grok grok.py grok-detailed; do
        if [ -e "$BIN/$f" ] || [ -L "$BIN/$f" ]; then
            rm -f "$BIN/$f"
            echo "removed  $BIN/$f"
        fi
    done
    [ -d "$SKILLS" ] || return 0
    { shipped_skills; manifest_entries; } | LC_ALL=C sort -u |
    while IFS= read -r rel; do
        [ -n "$rel" ] && [ -f "$SKILLS/$rel" ] || continue
        rm -f "$SKILLS/$rel"
        echo "removed  $SKILLS/$rel"
    done
    rm -f "$MANIFEST"
    # Drop now-empty sub-folders and skills/ itself; anything the user added keeps them.
    find "$SKILLS" -type d -empty -delete 2>/dev/null || true
    [ -d "$SKILLS" ] && echo "kept     $SKILLS (contains your own files)"
    return 0
}

do_install() {
    [ -f "$SRC/grok.py" ] || die "grok.py not found in $SRC (run install.sh from a complete checkout)"
    mkdir -p "$BIN"

    # grok.py goes in as a module and `grok` is a small launcher that imports it: Python caches
    # bytecode for imported modules but compiles a script on every run (~16 ms for grok.py).
    copy_file "$SRC/grok.py" "$BIN/grok.py" 644
    # Its bytecode now: the first start, a read-only bin dir and PYTHONDONTWRITEBYTECODE=1 skip it too.
    python3 -m py_compile "$BIN/grok.py" 2>/dev/null || true
    local launcher
    launcher=$(mktemp "$BIN/.install.XXXXXX")
    cat >"$launcher" <<'LAUNCHER'
#!/usr/bin/env python3
# grok launcher written by install.sh: runs grok.py from this directory as an imported module,
# so its cached bytecode is reused instead of compiling the whole script on every start.
import os
import sys
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from grok import main  # noqa: E402
raise SystemExit(main())
LAUNCHER
    chmod 755 "$launcher"
    mv -f "$launcher" "$BIN/grok"
    echo "installed $BIN/grok (launcher) and $BIN/grok.py"
    if [ -f "$SRC/grok_detailed.py" ]; then
        copy_file "$SRC/grok_detailed.py" "$BIN/grok-detailed" 755
        echo "installed $BIN/grok-detailed"
    fi

    local rel n=0 list
    list=$(shipped_skills)
    if [ -n "$list" ]; then
        while IFS= read -r rel; do
            mkdir -p "$(dirname "$SKILLS/$rel")"
            copy_file "$SRC/skills/$rel" "$SKILLS/$rel" 644
            n=$((n + 1))
        done <<<"$list"
        { printf '%s\n' "$list"; manifest_entries; } | LC_ALL=C sort -u >"$MANIFEST.tmp"
        mv -f "$MANIFEST.tmp" "$MANIFEST"
        echo "installed $n skill file(s) in $SKILLS/"
    fi

    if ! command -v python3 >/dev/null 2>&1; then
        echo "warning: python3 not found on PATH; grok needs Python 3.8 or newer" >&2
    elif ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 8))' 2>/dev/null; then
        echo "warning: $(python3 -V 2>&1) is too old; grok needs Python 3.8 or newer" >&2
    fi

    case ":$PATH:" in
        *":$BIN:"*) ;;
        *) echo
           echo "$BIN is not on your PATH: run $BIN/grok, or add it, e.g.:"
           echo "  echo 'export PATH=\"$BIN:\$PATH\"' >> ~/.bashrc && export PATH=\"$BIN:\$PATH\"" ;;
    esac

    if [ -z "${GROK_API_KEY:-}" ] && [ -z "${XAI_API_KEY:-}" ] &&
       ! grep -Eqs '^[[:space:]]*(export[[:space:]]+)?(GROK|XAI)_API_KEY=.' "$HOME/.grok/.env" "$HOME/.claude/.env"; then
        echo
        echo "No API key found: grok asks for it on a terminal (and offers to save it), or set"
        echo "GROK_API_KEY (or XAI_API_KEY) yourself, e.g. in ~/.grok/.env:"
        echo "  mkdir -p ~/.grok && echo 'GROK_API_KEY=xai-...' >> ~/.grok/.env && chmod 600 ~/.grok/.env"
    fi
}

if [ "$mode" = uninstall ]; then do_uninstall; else do_install; fi
