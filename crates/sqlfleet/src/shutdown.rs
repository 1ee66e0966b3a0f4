//! SIGINT (Ctrl-C) and SIGTERM, one way for every command that stops
//! cleanly: the first signal says on stderr what the command does now and
//! turns the returned receiver true (the command finishes what it started,
//! says what was done and how to go on); a second one exits at once with
//! 130, as the mysql client does. The exit code says which signal it was
//! (128 + its number: 130 for SIGINT, 143 for SIGTERM), so a service
//! manager or a CI job that stopped the command sees it stopped.

use std::sync::atomic::{AtomicI32, Ordering};

use tokio::signal::unix::{Signal, SignalKind};
use tokio::sync::watch;

/// Watches for SIGINT and SIGTERM; `command` names the command, `now` what
/// it does on the first signal.
pub fn on_interrupt(command: &'static str, now: &'static str) -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(SignalKind::terminate()).ok();
        if !next_signal(&mut term).await {
            return;
        }
        eprintln!("sqlfleet {command}: interrupted: {now} (Ctrl-C again to quit now)");
        let _ = tx.send(true);
        if next_signal(&mut term).await {
            std::process::exit(interrupted_exit() as i32);
        }
    });
    rx
}

/// Resolves at the first SIGINT or SIGTERM (for commands that stop
/// without a word: the relay drains, watch ends its output).
pub async fn signal() {
    let mut term = tokio::signal::unix::signal(SignalKind::terminate()).ok();
    if !next_signal(&mut term).await {
        std::future::pending::<()>().await;
    }
}

/// The first signal seen (0: none yet).
static FIRST: AtomicI32 = AtomicI32::new(0);

/// The exit code of a command a signal stopped: 128 + the first signal's
/// number, as shells report it (SIGINT when none was seen).
pub fn interrupted_exit() -> crate::exit::Exit {
    match FIRST.load(Ordering::Relaxed) {
        15 => crate::exit::Exit::Terminated,
        _ => crate::exit::Exit::Interrupted,
    }
}

/// Whether SIGINT or SIGTERM has come.
pub fn seen() -> bool {
    FIRST.load(Ordering::Relaxed) != 0
}

/// The next SIGINT or SIGTERM; false when signals cannot be watched.
async fn next_signal(term: &mut Option<Signal>) -> bool {
    let got = tokio::select! {
        r = tokio::signal::ctrl_c() => r.is_ok().then_some(2),
        _ = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        } => Some(15),
    };
    if let Some(n) = got {
        let _ = FIRST.compare_exchange(0, n, Ordering::Relaxed, Ordering::Relaxed);
    }
    got.is_some()
}
