//! One policy for a closed output pipe (`sqlfleet query ... | head -1`):
//! the command ends quietly when its reader goes away, as mysql and grep
//! do, with the status a shell reports for SIGPIPE (141) — not a panic
//! with a backtrace (Rust's `println!` panics on a closed stdout) nor a
//! "Broken pipe" error line.
//!
//! SIGPIPE itself stays ignored (Rust's default): a write to a Unix socket
//! whose server went away would otherwise kill the process without a word,
//! where it must be an error the command reports.

/// The exit status of a command whose reader went away.
pub const CLOSED: i32 = 141;

/// Makes a print to a closed stdout (or stderr) end the process quietly.
pub fn install() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if is_closed_pipe_text(text) {
            std::process::exit(CLOSED);
        }
        default(info);
    }));
}

/// `println!`'s panic on a closed stdout, or an error that is one.
fn is_closed_pipe_text(text: &str) -> bool {
    // println! says "failed printing to stdout: Broken pipe (os error 32)";
    // writers that expect() their writes (clap_complete's) say it their way.
    text.contains("Broken pipe (os error 32)") || text.contains("kind: BrokenPipe")
}

/// Whether a command's error is its output pipe closing (then nothing is
/// printed and the status is [`CLOSED`]).
pub fn is_closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_is_told_from_other_failures() {
        assert!(is_closed_pipe_text(
            "failed printing to stdout: Broken pipe (os error 32)"
        ));
        assert!(is_closed_pipe_text(
            "failed to write completion file: Os { code: 32, kind: BrokenPipe, message: \"Broken pipe\" }"
        ));
        assert!(!is_closed_pipe_text(
            "failed printing to stdout: No space left on device"
        ));
        assert!(!is_closed_pipe_text("index out of bounds"));
        let e = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            .context("writing rows");
        assert!(is_closed_pipe(&e));
        assert!(!is_closed_pipe(&anyhow::anyhow!(
            "Broken pipe in a message"
        )));
    }
}
