//! What a plugin prints (stdout, stderr) and logs (`host.log`), on its way
//! into the scheduler's log: one line per log record, control characters
//! escaped, long lines cut, and a rate limit per plugin (a token bucket
//! shared by all of the plugin's instances). What the limit drops is
//! counted (`wasmsched_plugin_log_dropped_bytes_total{plugin}`) and said
//! once per second in the log. Writing never blocks the guest.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::escape::escape;

/// Longest line kept (bytes); the rest of the line is cut.
pub const MAX_LINE: usize = 4096;
/// Sustained output per plugin, bytes per second.
pub const RATE: f64 = 16.0 * 1024.0;
/// Burst per plugin, bytes.
pub const BURST: f64 = 64.0 * 1024.0;

/// Severity of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

/// One plugin's output: the token bucket and the line being assembled.
pub struct PluginLog {
    plugin: Arc<str>,
    state: Mutex<State>,
}

struct State {
    tokens: f64,
    refilled: Instant,
    /// Output of stdout/stderr not yet ended by a newline.
    partial: Vec<u8>,
    dropped_since_note: u64,
    /// When a drop was last said (`None`: never, so the first is said at
    /// once, however short the run).
    noted: Option<Instant>,
}

impl PluginLog {
    /// The log of plugin `name` (one per name in the process).
    pub fn of(name: &str) -> Arc<PluginLog> {
        static LOGS: OnceLock<Mutex<HashMap<String, Arc<PluginLog>>>> = OnceLock::new();
        let logs = LOGS.get_or_init(Default::default);
        logs.lock()
            .entry(name.to_string())
            .or_insert_with(|| {
                Arc::new(PluginLog {
                    plugin: Arc::from(name),
                    state: Mutex::new(State {
                        tokens: BURST,
                        refilled: Instant::now(),
                        partial: Vec::new(),
                        dropped_since_note: 0,
                        noted: None,
                    }),
                })
            })
            .clone()
    }

    /// A `host.log` record.
    pub fn record(&self, level: Level, message: &str) {
        let line = cut(message.as_bytes());
        if self.admit(line.len()) {
            emit(&self.plugin, level, &line);
        }
    }

    /// Bytes written to stdout or stderr: complete lines are logged (at
    /// info), the rest waits for its newline (at most [`MAX_LINE`]).
    pub fn write(&self, bytes: &[u8]) {
        let mut lines = Vec::new();
        {
            let mut s = self.state.lock();
            for &b in bytes {
                if b == b'\n' {
                    lines.push(std::mem::take(&mut s.partial));
                } else if s.partial.len() < MAX_LINE {
                    s.partial.push(b);
                } else {
                    s.dropped_since_note += 1;
                }
            }
        }
        for line in lines {
            let text = cut(&line);
            if self.admit(text.len()) {
                emit(&self.plugin, Level::Info, &text);
            }
        }
    }

    /// Takes `n` bytes from the bucket; false (and counted) when empty.
    fn admit(&self, n: usize) -> bool {
        let mut s = self.state.lock();
        let now = Instant::now();
        let elapsed = now.duration_since(s.refilled).as_secs_f64();
        s.tokens = (s.tokens + elapsed * RATE).min(BURST);
        s.refilled = now;
        if s.tokens >= n as f64 {
            s.tokens -= n as f64;
            return true;
        }
        s.dropped_since_note += n as u64;
        crate::metrics::Metrics::global()
            .plugin_log_dropped_bytes
            .with_label_values(&[&self.plugin])
            .inc_by(n as u64);
        if s.noted
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
        {
            let dropped = std::mem::take(&mut s.dropped_since_note);
            s.noted = Some(now);
            drop(s);
            tracing::warn!(plugin = %self.plugin, dropped_bytes = dropped, "plugin output over its rate limit; dropped");
        }
        false
    }
}

/// A line as the log shows it: UTF-8 (lossy), escaped, at most
/// [`MAX_LINE`] bytes before escaping.
fn cut(bytes: &[u8]) -> String {
    let kept = &bytes[..bytes.len().min(MAX_LINE)];
    let text = String::from_utf8_lossy(kept);
    let mut out = escape(text.trim_end_matches('\r')).into_owned();
    if bytes.len() > MAX_LINE {
        out.push_str(" [cut]");
    }
    out
}

fn emit(plugin: &str, level: Level, message: &str) {
    match level {
        Level::Debug => tracing::debug!(plugin, "{message}"),
        Level::Info => tracing::info!(plugin, "{message}"),
        Level::Warn => tracing::warn!(plugin, "{message}"),
        Level::Error => tracing::error!(plugin, "{message}"),
    }
}

/// The guest's stdout and stderr: writes go to the plugin's log, never
/// block and never fail.
pub struct GuestOutput(pub Arc<PluginLog>);

impl wasmtime_wasi::cli::IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl wasmtime_wasi::cli::StdoutStream for GuestOutput {
    fn p2_stream(&self) -> Box<dyn wasmtime_wasi::p2::OutputStream> {
        Box::new(Stream(self.0.clone()))
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        // The p3 interfaces are not linked; nothing reaches this.
        Box::new(tokio::io::sink())
    }
}

struct Stream(Arc<PluginLog>);

#[async_trait::async_trait]
impl wasmtime_wasi::p2::Pollable for Stream {
    async fn ready(&mut self) {}
}

#[async_trait::async_trait]
impl wasmtime_wasi::p2::OutputStream for Stream {
    fn write(&mut self, bytes: bytes::Bytes) -> wasmtime_wasi::p2::StreamResult<()> {
        self.0.write(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> wasmtime_wasi::p2::StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> wasmtime_wasi::p2::StreamResult<usize> {
        Ok(64 * 1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_cut_and_escaped() {
        assert_eq!(cut(b"ok\r"), "ok");
        assert_eq!(cut(b"a\x1b[31mred"), escape("a\x1b[31mred"));
        let long = vec![b'x'; MAX_LINE + 10];
        let c = cut(&long);
        assert!(
            c.ends_with(" [cut]") && c.len() == MAX_LINE + 6,
            "{}",
            c.len()
        );
    }

    #[test]
    fn the_bucket_drops_past_the_burst_and_counts() {
        let log = PluginLog::of("output-test-burst");
        let before = crate::metrics::Metrics::global()
            .plugin_log_dropped_bytes
            .with_label_values(&["output-test-burst"])
            .get();
        let line = vec![b'y'; 1000];
        let mut written = 0;
        for _ in 0..200 {
            let mut l = line.clone();
            l.push(b'\n');
            log.write(&l);
            written += 1000;
        }
        let dropped = crate::metrics::Metrics::global()
            .plugin_log_dropped_bytes
            .with_label_values(&["output-test-burst"])
            .get()
            - before;
        // 200 KB written at once, a 64 KiB burst: most of it dropped.
        assert!(dropped as f64 >= written as f64 - BURST - RATE, "{dropped}");
        assert!(dropped < written, "the burst passed");
    }
}
