//! SIGINT (Ctrl-C) and SIGTERM, one way for every command that stops
//! cleanly: the first signal says on stderr what the command does now and
//! turns the returned receiver true (the command finishes what it started,
//! says what was done and how to go on); a second one exits at once with
//! 130, as the mysql client does.

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
            std::process::exit(130);
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

/// The next SIGINT or SIGTERM; false when signals cannot be watched.
async fn next_signal(term: &mut Option<Signal>) -> bool {
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.is_ok(),
        _ = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        } => true,
    }
}
