//! Text from files and devices made safe to print: a tensor name, a path or a backend's message
//! may hold newlines, carriage returns or terminal escapes, which would forge an `error:` line,
//! rewrite a table row or recolour the terminal. Every name the command prints goes through
//! [`printable`], and every error through [`one_line`].

use std::borrow::Cow;

/// Whether `c` must not reach a terminal as it is: control characters (C0, DEL, C1: newline,
/// `\r`, ESC, …) and the bidirectional overrides and isolates that reorder what is shown.
fn is_unsafe(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with every unsafe character escaped as Rust writes it (`\n`, `\r`, `\u{1b}`), borrowed
/// unchanged when there is none: what was in the name stays visible, and it stays one line.
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A message as one line. A backend's message may span several lines (a wgpu validation error
/// with its `Caused by:` chain): its non-blank lines are trimmed and joined with ` | `. With
/// `escape_all`, line breaks are escaped like any other control character instead: a message
/// built around a name from a file, whose newline must show as `\n`, not read as structure.
pub fn one_line(message: &str, escape_all: bool) -> String {
    if escape_all {
        return printable(message).into_owned();
    }
    let joined: Vec<&str> = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    printable(&joined.join(" | ")).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_and_overrides_are_escaped() {
        assert!(matches!(printable("layer.0.weight"), Cow::Borrowed(_)));
        assert_eq!(printable("a\nerror: b"), "a\\nerror: b");
        assert_eq!(printable("x\r\u{1b}[31my"), "x\\r\\u{1b}[31my");
        assert_eq!(printable("\u{202e}txt"), "\\u{202e}txt");
        assert_eq!(printable("ü×é"), "ü×é");
    }

    #[test]
    fn backend_messages_join_their_lines() {
        let wgpu = "Validation Error\n\nCaused by:\n    In Device::create_buffer\n      too big\n";
        assert_eq!(
            one_line(wgpu, false),
            "Validation Error | Caused by: | In Device::create_buffer | too big"
        );
        assert_eq!(one_line("tensor `a\nb`", true), "tensor `a\\nb`");
    }
}
