//! A Ctrl-C or SIGTERM the command saw, as `up` and `promote` look at it:
//! between their steps and inside their waits (a server starting, a
//! replica catching up, a cluster member syncing). `up` then stops the
//! servers it was starting and removes a sandbox it was making; `promote`
//! stops before its switch (nothing changed) or finishes a switch it has
//! begun. No signal handling here: the binary owns the signals and hands
//! over what it saw.

use tokio::sync::watch;

use crate::error::{Result, SandboxError};

/// What the command saw; `Interrupt::default()` never fires.
#[derive(Debug, Clone, Default)]
pub struct Interrupt(Option<watch::Receiver<bool>>);

impl Interrupt {
    /// Fires when `rx` turns true.
    pub fn new(rx: watch::Receiver<bool>) -> Interrupt {
        Interrupt(Some(rx))
    }

    /// Whether the signal has come.
    pub fn seen(&self) -> bool {
        self.0.as_ref().is_some_and(|r| *r.borrow())
    }

    /// `Err(Interrupted)` once the signal has come.
    pub fn check(&self) -> Result<()> {
        if self.seen() {
            Err(SandboxError::interrupted())
        } else {
            Ok(())
        }
    }

    /// Resolves when the signal comes (never without one).
    pub async fn wait(&self) {
        if let Some(mut r) = self.0.clone() {
            if r.wait_for(|v| *v).await.is_ok() {
                return;
            }
        }
        std::future::pending::<()>().await
    }
}
