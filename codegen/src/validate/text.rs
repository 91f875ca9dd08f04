//! Doc text from the manifest, which becomes `///` comments: nothing in it may break the build
//! or hide text from a reader.

use crate::diag::{Diagnostic, page};
use crate::model::Sp;

/// Unicode's bidirectional controls, which rustc refuses in comments
/// (`text_direction_codepoint_in_comment`): they make the text read differently than it runs.
const BIDI: &[char] = &[
    '\u{061C}', '\u{200E}', '\u{200F}', '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}',
    '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}',
];

/// Whether `c` is one of Unicode's bidirectional controls.
pub(crate) fn is_bidi(c: char) -> bool {
    BIDI.contains(&c)
}

/// The note of an op's `deprecated`, as its `#[deprecated]` attribute carries it: one line of
/// text with something in it. Refused, at the offending character: line breaks, bidirectional
/// and other control characters (a tab becomes a space); and an empty note, which would tell the
/// caller nothing.
pub(super) fn deprecation_note(
    note: &Sp<String>,
    source: &str,
    key: &str,
) -> Result<String, Diagnostic> {
    for (at, c) in note.value.char_indices() {
        let problem = if c == '\n' || c == '\r' {
            Some((
                "the note of `deprecated` has a line break".to_owned(),
                "write it on one line: it is the one line the compiler prints beside each call"
                    .to_owned(),
            ))
        } else if BIDI.contains(&c) || (c.is_control() && c != '\t') {
            Some((
                format!(
                    "the note of `deprecated` contains the control character U+{:04X}",
                    u32::from(c)
                ),
                "remove it: the note is text the compiler prints".to_owned(),
            ))
        } else {
            None
        };
        if let Some((message, help)) = problem {
            let pos = offset_in_source(note, source, at);
            return Err(Diagnostic::new(pos..pos + 1, key, message)
                .page(page::DOC_TEXT)
                .help(help));
        }
    }
    let text = note.value.replace('\t', " ");
    let text = text.trim();
    if text.is_empty() {
        return Err(Diagnostic::new(
            note.span.clone(),
            key,
            "the note of `deprecated` is empty",
        )
        .page(page::DOC_TEXT)
        .help("say what to use instead (`deprecated = \"use fused_gelu\"`), or remove `deprecated`"));
    }
    Ok(text.to_owned())
}

/// The doc's lines, with trailing whitespace removed and tabs expanded to four spaces; a `\r\n`
/// line break counts as `\n`.
/// Refused, at the offending character: bidirectional controls, a carriage return that is not
/// part of `\r\n` (rustc refuses a bare CR in doc comments), other control characters (only
/// tab and line breaks are text), and a code fence that is never closed (it would turn the
/// generated routing notes that follow into a doctest).
pub(super) fn doc_lines(
    doc: &Sp<String>,
    source: &str,
    key: &str,
) -> Result<Vec<String>, Diagnostic> {
    let text = &doc.value;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let problem = if BIDI.contains(&c) {
            Some((
                format!(
                    "doc contains the bidirectional control U+{:04X}",
                    u32::from(c)
                ),
                "remove it: rustc refuses bidirectional controls in comments, which make text read differently than it is",
            ))
        } else if c == '\r' {
            if chars.peek().is_some_and(|(_, next)| *next == '\n') {
                None
            } else {
                Some((
                    "doc contains a carriage return that does not end a line".to_owned(),
                    "remove it, or write line breaks as `\\n` (rustc refuses a bare CR in doc comments)",
                ))
            }
        } else if c.is_control() && c != '\n' && c != '\t' {
            Some((
                format!("doc contains the control character U+{:04X}", u32::from(c)),
                "remove it: docs are text; only tabs and line breaks are allowed",
            ))
        } else {
            None
        };
        if let Some((message, help)) = problem {
            let pos = offset_in_source(doc, source, at);
            return Err(Diagnostic::new(pos..pos + 1, key, message)
                .page(page::DOC_TEXT)
                .help(help));
        }
    }
    // Tabs become four spaces: rustdoc renders them unevenly, and clippy's
    // `tabs_in_doc_comments` refuses them. The indentation every line shares (a multi-line
    // TOML string aligned with the manifest's own indentation) is removed: markdown would read
    // it as code.
    let expanded: Vec<String> = text
        .lines()
        .map(|l| l.trim_end().replace('\t', "    "))
        .collect();
    let common = expanded
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let lines: Vec<String> = expanded
        .iter()
        .map(|l| l.get(common..).unwrap_or("").to_owned())
        .collect();
    let raw: Vec<&str> = lines.iter().map(String::as_str).collect();
    // Where each line of the value starts (before dedenting), for positions.
    let starts: Vec<usize> = text
        .split('\n')
        .scan(0usize, |at, line| {
            let start = *at;
            *at += line.len() + 1;
            Some(start)
        })
        .collect();
    let (kinds, open_fence) = crate::markdown::classify(&raw);
    if let Some(index) = open_fence {
        let line = raw[index];
        let at = starts[index] + common + (line.len() - line.trim_start().len());
        let pos = offset_in_source(doc, source, at);
        return Err(Diagnostic::new(pos..pos + 3, key, format!("doc opens a code fence that it never closes (doc line {})", index + 1))
            .page(page::DOC_TEXT)
            .help("close it with a line of the same fence (at least as many ``` or ~~~ as it opens with); an open fence would turn the generated notes after the doc into code"));
    }
    if let Some((index, message, help)) = crate::markdown::lint(&raw, &kinds) {
        let pos = offset_in_source(doc, source, starts[index]);
        return Err(Diagnostic::new(
            pos..pos + 1,
            key,
            format!("{message} (doc line {})", index + 1),
        )
        .page(page::DOC_TEXT)
        .help(help));
    }
    Ok(lines)
}

/// The source offset of byte `at` of a string value: exact when the string is written without
/// escapes, else the string's start.
fn offset_in_source(value: &Sp<String>, source: &str, at: usize) -> usize {
    let Some(raw) = source.get(value.span.clone()) else {
        return value.span.start;
    };
    for quote in ["\"\"\"", "'''", "\"", "'"] {
        if let Some(inner) = raw.strip_prefix(quote).and_then(|r| r.strip_suffix(quote)) {
            // A multi-line string drops the line break right after its opening quotes.
            let skip = if quote.len() == 3 {
                if inner.starts_with("\r\n") {
                    2
                } else {
                    usize::from(inner.starts_with('\n'))
                }
            } else {
                0
            };
            if inner.get(skip..) == Some(value.value.as_str()) {
                return value.span.start + quote.len() + skip + at;
            }
            break;
        }
    }
    value.span.start
}
