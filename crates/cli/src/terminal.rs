//! What reaches the user's terminal. Much of what the CLI prints was chosen by someone
//! else: a session label or a server name another token holder sent, an upstream's tool
//! descriptions, error messages and results. A terminal obeys control characters in that
//! text (ESC and CSI sequences retitle the window or move the cursor, `\r` and `\n` forge
//! a line), so every human-readable line goes out through [`say!`] or [`say_err!`], which
//! show each such character as an escape (`\x1b`, `\r`, `\u{9b}`) instead of sending it.
//! A result's text, which is many lines by nature, goes through [`say_text!`], which keeps
//! line feeds and tabs. `--json` output is printed as is: JSON escapes controls itself.
//!
//! Nothing here may print a caller's or upstream's text with plain `println!`.

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with every control character escaped, line feeds and tabs included: one line.
pub fn line(text: &str) -> Cow<'_, str> {
    escape(text, |_| false)
}

/// `text` with every control character escaped but line feeds and tabs: lines of text.
pub fn text(text: &str) -> Cow<'_, str> {
    escape(text, |c| c == '\n' || c == '\t')
}

fn escape(text: &str, kept: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(|c| obeyed(c) && !kept(c)) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            c if !obeyed(c) || kept(c) => shown.push(c),
            '\n' => shown.push_str("\\n"),
            '\r' => shown.push_str("\\r"),
            '\t' => shown.push_str("\\t"),
            c if (c as u32) < 0x80 => {
                let _ = write!(shown, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(shown, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(shown)
}

/// Whether a terminal acts on `c` rather than showing it: C0 controls, DEL and C1
/// controls (U+009B is a one-character CSI), and the bidirectional controls and line
/// separators that reorder or break the text around them.
fn obeyed(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `println!` for human-readable output: the whole line, escaped by [`line`].
macro_rules! say {
    () => { println!() };
    ($($arg:tt)*) => { println!("{}", $crate::terminal::line(&format!($($arg)*))) };
}

/// `eprintln!` for messages, escaped by [`line`].
macro_rules! say_err {
    ($($arg:tt)*) => { eprintln!("{}", $crate::terminal::line(&format!($($arg)*))) };
}

/// `println!` for text of many lines (a result's text, a diff), escaped by [`text`].
macro_rules! say_text {
    ($($arg:tt)*) => { println!("{}", $crate::terminal::text(&format!($($arg)*))) };
}

pub(crate) use {say, say_err, say_text};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_shown_not_sent() {
        let hostile = "a\u{1b}]0;owned\u{7}b\u{1b}[2Jc\r\nd\u{9b}31me\u{202e}f\u{7f}";
        let shown = line(hostile);
        assert_eq!(shown, "a\\x1b]0;owned\\x07b\\x1b[2Jc\\r\\nd\\u{9b}31me\\u{202e}f\\x7f");
        assert!(!shown.chars().any(obeyed), "{shown}");
        assert_eq!(text("one\n\ttwo\r"), "one\n\ttwo\\r");
        assert!(matches!(line("plain, ünïcode ✓"), Cow::Borrowed(_)));
    }
}
