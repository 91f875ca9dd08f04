//! TOML syntax errors as diagnostics: the parser's message with a fix, and for the two it
//! explains badly (an unterminated string, a duplicate key) the position and the words of
//! burn-route's own.

use super::*;

use crate::diag::SYNTAX_KEY;

/// A TOML syntax error as a diagnostic. An unterminated string points at its opening quote
/// (the parser stops at the end of the line or file); a duplicate key names where the key was
/// first defined.
pub(super) fn syntax_diagnostic(source: &str, span: Range<usize>, message: &str) -> Diagnostic {
    let line_of = |at: usize| source[..at.min(source.len())].matches('\n').count() + 1;
    if message.starts_with("invalid") && message.contains("string, expected") {
        let multi = message.contains("multi-line");
        let open = if multi {
            let quote = if message.contains("literal") {
                "'''"
            } else {
                "\"\"\""
            };
            source[..span.start.min(source.len())].rfind(quote)
        } else {
            open_quote_on_line(source, span.start)
        };
        if let Some(open) = open {
            let close = if multi {
                if message.contains("literal") {
                    "'''"
                } else {
                    "\"\"\""
                }
            } else if message.contains("literal") {
                "'"
            } else {
                "\""
            };
            let help = if multi {
                format!("close it with `{close}`")
            } else {
                format!(
                    "close it with `{close}` on the same line (use `\"\"\"` for a string of several lines)"
                )
            };
            return Diagnostic::new(
                open..open + close.len(),
                SYNTAX_KEY,
                "TOML syntax error: unterminated string (it starts here)",
            )
            .page(page::SYNTAX)
            .help(help);
        }
    }
    if message == "duplicate key" {
        let key = source.get(span.clone()).unwrap_or_default().trim();
        let first = first_definition(source, span.start, key);
        let message = match first {
            Some(at) => format!(
                "TOML syntax error: duplicate key `{key}` (first defined on line {})",
                line_of(at)
            ),
            None => format!("TOML syntax error: duplicate key `{key}`"),
        };
        return Diagnostic::new(span, SYNTAX_KEY, message)
            .page(page::SYNTAX)
            .help("keep one of the two: a key may appear once in a table");
    }
    Diagnostic::new(span, SYNTAX_KEY, format!("TOML syntax error: {message}"))
        .page(page::SYNTAX)
        .help(format!(
            "write what TOML expects at this position ({message}; see https://toml.io)"
        ))
}

/// The opening quote of the string still open at the end of the line holding `at`.
pub(super) fn open_quote_on_line(source: &str, at: usize) -> Option<usize> {
    let at = at.min(source.len());
    let start = source[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = source[at..].find('\n').map_or(source.len(), |i| at + i);
    let mut open: Option<(usize, char)> = None;
    let mut escaped = false;
    for (i, c) in source[start..end].char_indices() {
        match open {
            None if c == '#' => break,
            None if c == '"' || c == '\'' => open = Some((start + i, c)),
            None => {}
            Some((_, '"')) if escaped => escaped = false,
            Some((_, '"')) if c == '\\' => escaped = true,
            Some((_, q)) if c == q => open = None,
            Some(_) => {}
        }
    }
    open.map(|(i, _)| i)
}

/// Where `key` was defined before `at`: the same table header, or the same key in the same
/// table (the same inline table when `at` is inside one).
pub(super) fn first_definition(source: &str, at: usize, key: &str) -> Option<usize> {
    if key.is_empty() {
        return None;
    }
    let before = &source[..at.min(source.len())];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = &before[line_start..];
    // A table header: `[key]` on an earlier line.
    if line.trim_start().starts_with('[') {
        let mut offset = 0;
        for l in before[..line_start].split_inclusive('\n') {
            let t = l.trim();
            if t.starts_with('[') && t.trim_start_matches('[').trim_end_matches(']').trim() == key {
                return Some(offset + l.find(key).unwrap_or(0));
            }
            offset += l.len();
        }
        return None;
    }
    // Inside an inline table: search back to its `{` on this line.
    let (scope_start, scope) = match line.rfind('{') {
        Some(brace) => (line_start + brace, &line[brace..]),
        None => {
            // The enclosing table starts at the last header line before this one.
            let mut start = 0;
            let mut offset = 0;
            for l in before[..line_start].split_inclusive('\n') {
                if l.trim_start().starts_with('[') {
                    start = offset;
                }
                offset += l.len();
            }
            (start, &before[start..line_start])
        }
    };
    let mut from = 0;
    while let Some(i) = scope[from..].find(key) {
        let pos = from + i;
        let boundary_before = scope[..pos]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '-'));
        let rest = scope[pos + key.len()..].trim_start_matches([' ', '\t']);
        if boundary_before && rest.starts_with('=') {
            return Some(scope_start + pos);
        }
        from = pos + key.len();
    }
    None
}
