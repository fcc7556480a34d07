//! Text that came from input (object names, file names, plugin messages)
//! made safe to print. Control characters (newline, NUL, ESC, ...) and
//! Unicode line separators and direction overrides are written escaped, so a hostile name can
//! neither split a one-line error or log line nor drive the terminal.
//! Valid Kubernetes names and label values contain none of them and print
//! unchanged.

use std::borrow::Cow;
use std::fmt::{self, Write};

/// Whether `c` must not reach a terminal or log as it is.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
        )
}

/// `s` with each unsafe character written as a Rust escape (`\n`,
/// `\u{0}`, `\u{1b}`); borrowed when there is none.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    let _ = EscapingWriter(&mut out).write_str(s);
    Cow::Owned(out)
}

/// The longest valid object name (a DNS subdomain).
const NAME_CHARS: usize = 253;

/// An object name for a message: [`escape`]d, and cut (ending in `...`)
/// when longer than any valid name, so a hostile one cannot flood a line.
pub fn name(s: &str) -> Cow<'_, str> {
    match s.char_indices().nth(NAME_CHARS) {
        None => escape(s),
        Some((i, _)) => Cow::Owned(format!("{}...", escape(&s[..i]))),
    }
}

/// Displays a string escaped: `format!("{}", Escaped(name))`.
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        EscapingWriter(f).write_str(self.0)
    }
}

/// A writer that escapes what is written through it (for formatting
/// values that are not strings yet, as log fields are).
pub struct EscapingWriter<W>(pub W);

impl<W: Write> Write for EscapingWriter<W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut rest = s;
        while let Some((i, c)) = rest.char_indices().find(|(_, c)| unsafe_char(*c)) {
            self.0.write_str(&rest[..i])?;
            for e in c.escape_default() {
                self.0.write_char(e)?;
            }
            rest = &rest[i + c.len_utf8()..];
        }
        self.0.write_str(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_names_are_unchanged_and_borrowed() {
        for s in ["web-1", "shop/web-1", "example.com/gpu", "Ünïcode ok", ""] {
            assert!(matches!(escape(s), Cow::Borrowed(b) if b == s), "{s}");
        }
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape("a\nb"), "a\\nb");
        assert_eq!(escape("nul\0"), "nul\\u{0}");
        assert_eq!(escape("\x1b[31mred"), "\\u{1b}[31mred");
        assert_eq!(escape("cr\r\ttab"), "cr\\r\\ttab");
        assert_eq!(escape("c1\u{9b}"), "c1\\u{9b}");
        assert_eq!(escape("rtl\u{202e}txt"), "rtl\\u{202e}txt");
        assert_eq!(Escaped("x\ny").to_string(), "x\\ny");
        assert_eq!(name("web-1"), "web-1");
        assert_eq!(name(&"n\n".repeat(1000)).len(), 127 + 126 * 2 + 3);
        assert_eq!(escape("\u{7f}\u{85}\u{2028}"), "\\u{7f}\\u{85}\\u{2028}");
    }
}
