//! Writing command output to stdout, where a reader that went away
//! (`seckill stats | head`) ends the output quietly instead of a panic.

use std::io::{ErrorKind, Write};

/// Writes `text` to stdout; a closed pipe is not an error.
pub(crate) fn emit(text: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(error) if error.kind() == ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}
