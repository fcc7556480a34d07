//! A spinner on the terminal while a component compiles for longer than
//! [`AFTER`] (a Python or JavaScript component takes 10-20 s): its name
//! and the seconds so far, cleared when done. Nothing when stderr is not
//! a terminal (logs, pipes, a Deployment).

use std::sync::mpsc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long a compilation runs before the spinner shows.
pub const AFTER: Duration = Duration::from_secs(1);

/// Runs `f`, showing a spinner for `label` on stderr if it runs longer
/// than [`AFTER`] and stderr is a terminal.
pub fn while_compiling<T>(label: &str, f: impl FnOnce() -> T) -> T {
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return f();
    }
    let (done, wait) = mpsc::channel::<()>();
    let message = format!("compiling plugin {label}");
    let spinner = std::thread::spawn(move || {
        if wait.recv_timeout(AFTER) != Err(mpsc::RecvTimeoutError::Timeout) {
            return;
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            bar.set_style(style);
        }
        bar.set_message(message);
        bar.enable_steady_tick(Duration::from_millis(120));
        let _ = wait.recv();
        bar.finish_and_clear();
    });
    let out = f();
    drop(done);
    let _ = spinner.join();
    out
}
