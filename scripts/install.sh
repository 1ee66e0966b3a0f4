#!/usr/bin/env bash
# Builds sqlfleet and installs the binary: $PREFIX/bin/sqlfleet (PREFIX
# defaults to ~/.local, so ~/.local/bin/sqlfleet), with bash completions
# and man pages beside it when they can be written. Installs what the build
# and the sandboxes need first (scripts/deps.sh --core: mariadb-server,
# mariadb-client, a C compiler, make, curl, Rust).
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX="${PREFIX:-$HOME/.local}"
bash scripts/deps.sh --core
source scripts/env.sh
cargo install --quiet --locked --path crates/sqlfleet --root "$PREFIX"
BIN="$PREFIX/bin/sqlfleet"
if mkdir -p "$PREFIX/share/bash-completion/completions" 2>/dev/null; then
  "$BIN" completions bash > "$PREFIX/share/bash-completion/completions/sqlfleet" || true
fi
if mkdir -p "$PREFIX/share/man/man1" 2>/dev/null; then
  "$BIN" man --out "$PREFIX/share/man/man1" >/dev/null 2>&1 || true
fi
echo "installed $BIN ($("$BIN" --version))"
case ":$PATH:" in
  *":$PREFIX/bin:"*) ;;
  *) echo "note: $PREFIX/bin is not on your PATH; add it: export PATH=\"$PREFIX/bin:\$PATH\"" ;;
esac
