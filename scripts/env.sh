# Sourced by the other scripts: cargo on PATH, a target dir outside the
# clone when CI asks for one.
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
SQLFLEET_TARGET="${CARGO_TARGET_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/target}"
export SQLFLEET_TARGET
