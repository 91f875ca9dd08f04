//! Just enough CommonMark to handle doc text from the manifest: which lines are inside code
//! blocks (validation refuses an unclosed fence and indented code; the emitter never wraps
//! code), and the shapes clippy's doc lints refuse.

/// A fenced code block's opening line: its indentation, fence character, length and info
/// string.
fn opening_fence(line: &str) -> Option<(usize, char, usize, &str)> {
    let indent = indent_of(line);
    let rest = &line[indent..];
    let c = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = rest.chars().take_while(|x| *x == c).count();
    if len < 3 {
        return None;
    }
    let info = rest[len..].trim();
    // A backtick fence's info string may not contain a backtick.
    if c == '`' && info.contains('`') {
        return None;
    }
    Some((indent, c, len, info))
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// Whether `line` closes a fence opened with `len` `c`s at `indent`: at most 3 spaces past the
/// container's indentation, at least as many of the same character, nothing else.
fn closes(line: &str, indent: usize, c: char, len: usize) -> bool {
    let own = indent_of(line);
    if own > indent + 3 {
        return false;
    }
    let rest = line[own..].trim_end();
    rest.len() >= len && rest.chars().all(|x| x == c)
}

/// Whether rustdoc compiles a fenced block with this info string as Rust (a doctest).
fn is_rust(info: &str) -> bool {
    const RUST_TAGS: &[&str] = &[
        "rust",
        "no_run",
        "should_panic",
        "compile_fail",
        "test_harness",
        "standalone_crate",
        "edition2015",
        "edition2018",
        "edition2021",
        "edition2024",
    ];
    info.split([',', ' ', '\t'])
        .filter(|t| !t.is_empty())
        .all(|t| RUST_TAGS.contains(&t))
}

/// One doc line and where it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Prose.
    Text,
    /// A fence line (opening or closing).
    Fence,
    /// Inside a fenced code block; `rust` when rustdoc runs it as a doctest.
    Code { rust: bool },
    /// An indented code block (four spaces after a blank line, outside lists): a doctest.
    Indented,
}

/// The kind of each line, and the index of a top-level fence left open at the end, if any (a
/// fence inside an indented list item is closed by the end of the item).
pub fn classify(lines: &[&str]) -> (Vec<Kind>, Option<usize>) {
    let mut kinds = Vec::with_capacity(lines.len());
    // (indent, char, length, rust, line)
    let mut open: Option<(usize, char, usize, bool, usize)> = None;
    let mut previous_blank = true;
    let mut in_item = false;
    for (i, line) in lines.iter().enumerate() {
        let blank = line.trim().is_empty();
        if let Some((indent, c, len, rust, _)) = open {
            if closes(line, indent, c, len) {
                kinds.push(Kind::Fence);
                open = None;
            } else if indent > 0 && !blank && indent_of(line) < indent {
                // The list item holding the fence ended, and the fence with it.
                open = None;
                kinds.push(Kind::Text);
            } else {
                kinds.push(Kind::Code { rust });
            }
            previous_blank = blank;
            continue;
        }
        if let Some((indent, c, len, info)) = opening_fence(line)
            && (indent <= 3 || in_item)
        {
            kinds.push(Kind::Fence);
            open = Some((indent, c, len, is_rust(info), i));
            previous_blank = false;
            continue;
        }
        if !blank && list_item_content(line).is_some() {
            in_item = true;
        } else if !blank && indent_of(line) == 0 {
            in_item = false;
        }
        let continues_code = matches!(kinds.last(), Some(Kind::Indented));
        if !blank && (previous_blank && !in_item || continues_code) && indent_of(line) >= 4 {
            kinds.push(Kind::Indented);
        } else {
            kinds.push(Kind::Text);
        }
        previous_blank = blank;
    }
    let unclosed = open.filter(|(indent, ..)| *indent == 0).map(|(.., at)| at);
    (kinds, unclosed)
}

/// The column where a list item's text starts, when `line` starts a list item (`- `, `* `,
/// `+ `, `1. `, `1) `, with one to four spaces after the marker).
pub fn list_item_content(line: &str) -> Option<usize> {
    let indent = indent_of(line);
    let rest = &line[indent..];
    let marker = if rest.starts_with(['-', '*', '+']) {
        1
    } else {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if (1..=9).contains(&digits) && rest[digits..].starts_with(['.', ')']) {
            digits + 1
        } else {
            return None;
        }
    };
    let after = &rest[marker..];
    let spaces = after.len() - after.trim_start_matches(' ').len();
    if spaces == 0 || after.trim().is_empty() {
        return None;
    }
    Some(indent + marker + if spaces > 4 { 1 } else { spaces })
}

/// Whether a list item starting on `line` may interrupt the paragraph before it: a bullet
/// always may, an ordered item only when it starts at 1 (CommonMark).
fn interrupts(line: &str) -> bool {
    let rest = line.trim_start();
    !rest.starts_with(|c: char| c.is_ascii_digit())
        || rest.starts_with("1.")
        || rest.starts_with("1)")
}

/// What would break the crate because of `lines`: the index of the line and what is wrong —
/// clippy's doc lints, and indented code, which rustdoc runs as a Rust doctest.
pub fn lint(lines: &[&str], kinds: &[Kind]) -> Option<(usize, &'static str, &'static str)> {
    lint_html(lines, kinds)
        .or_else(|| lint_quotes(lines, kinds))
        .or_else(|| lint_footnotes(lines, kinds))
        .or_else(|| lint_blocks(lines, kinds))
}

/// An HTML comment or `<pre>` left open would swallow everything after it, the generated
/// routing notes included.
fn lint_html(lines: &[&str], kinds: &[Kind]) -> Option<(usize, &'static str, &'static str)> {
    for (open, close, message, help) in [
        (
            "<!--",
            "-->",
            "doc opens an HTML comment (`<!--`) that it never closes",
            "close it with `-->`, or remove it",
        ),
        (
            "<pre",
            "</pre>",
            "doc opens a `<pre>` block that it never closes",
            "close it with `</pre>`, or use a fenced block",
        ),
    ] {
        let mut opened: Option<usize> = None;
        for (i, line) in lines.iter().enumerate() {
            if kinds[i] != Kind::Text {
                continue;
            }
            let mut rest = *line;
            loop {
                match opened {
                    None => match rest.find(open) {
                        Some(at) => {
                            opened = Some(i);
                            rest = &rest[at + open.len()..];
                        }
                        None => break,
                    },
                    Some(_) => match rest.find(close) {
                        Some(at) => {
                            opened = None;
                            rest = &rest[at + close.len()..];
                        }
                        None => break,
                    },
                }
            }
        }
        if let Some(i) = opened {
            return Some((i, message, help));
        }
    }
    None
}

/// The same rules inside each `>` quote: its lines without the `>`.
fn lint_quotes(lines: &[&str], kinds: &[Kind]) -> Option<(usize, &'static str, &'static str)> {
    let mut i = 0;
    while i < lines.len() {
        let quoted = |l: &str| l.trim_start().starts_with('>');
        if kinds[i] != Kind::Text || !quoted(lines[i]) {
            i += 1;
            continue;
        }
        let start = i;
        let mut inner: Vec<&str> = Vec::new();
        while i < lines.len() && kinds[i] == Kind::Text && quoted(lines[i]) {
            let rest = &lines[i].trim_start()[1..];
            inner.push(rest.strip_prefix(' ').unwrap_or(rest));
            i += 1;
        }
        for (j, line) in inner.iter().enumerate() {
            if let Some(content) = list_item_content(line)
                && line[content..].trim_start().starts_with('[')
                && line.contains("]:")
            {
                return Some((
                    start + j,
                    "doc has a link reference definition inside a quote, which clippy refuses (`doc_nested_refdefs`)",
                    "move `[name]: url` out of the quote",
                ));
            }
            if line.trim_start().starts_with('[') && line.contains("]:") {
                return Some((
                    start + j,
                    "doc has a link reference definition inside a quote, which clippy refuses (`doc_nested_refdefs`)",
                    "move `[name]: url` out of the quote",
                ));
            }
        }
        let (inner_kinds, _) = classify(&inner);
        if let Some((j, message, help)) = lint_blocks(&inner, &inner_kinds) {
            return Some((start + j, message, help));
        }
    }
    None
}

/// A footnote reference (`[^1]`) needs its definition (`[^1]: ...`), else clippy refuses it
/// (`doc_suspicious_footnotes`).
fn lint_footnotes(lines: &[&str], kinds: &[Kind]) -> Option<(usize, &'static str, &'static str)> {
    let defined: Vec<&str> = lines
        .iter()
        .filter_map(|l| {
            let t = l.trim_start().strip_prefix("[^")?;
            let end = t.find("]:")?;
            Some(&t[..end])
        })
        .collect();
    for (i, line) in lines.iter().enumerate() {
        if kinds[i] != Kind::Text {
            continue;
        }
        let mut rest = *line;
        while let Some(at) = rest.find("[^") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(']') else { break };
            let label = &after[..end];
            let definition = after[end..].starts_with("]:");
            // As clippy reads it: an escaped `\[` or one inside inline code is text, and only a
            // numeric label looks like a footnote.
            let escaped = rest[..at].ends_with('\\');
            let in_code = line[..line.len() - rest.len() + at].matches('`').count() % 2 == 1;
            let numeric = !label.is_empty() && label.chars().all(|c| c.is_ascii_digit());
            if !definition && numeric && !escaped && !in_code && !defined.contains(&label) {
                return Some((
                    i,
                    "doc has a footnote reference without its definition, which clippy refuses (`doc_suspicious_footnotes`)",
                    "add the definition (`[^label]: text`) on a line of its own, or escape the `[`",
                ));
            }
            rest = &after[end..];
        }
    }
    None
}

/// Lists, quotes and code blocks at one level of the doc.
fn lint_blocks(lines: &[&str], kinds: &[Kind]) -> Option<(usize, &'static str, &'static str)> {
    // The content column of the list item the current paragraph belongs to, if any.
    let mut item: Option<usize> = None;
    let mut quote = false;
    let mut previous_blank = true;
    for (i, line) in lines.iter().enumerate() {
        let text = line.trim();
        match kinds[i] {
            Kind::Code { rust: true } | Kind::Indented => {
                if kinds[i] == Kind::Indented {
                    return Some((
                        i,
                        "doc has an indented code block, which rustdoc runs as a Rust doctest",
                        "use a fenced block instead: ```text for output or other text, ```rust for a Rust example",
                    ));
                }
                let squeezed: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
                if squeezed.starts_with("fn main(") || squeezed.starts_with("fn main (") {
                    return Some((
                        i,
                        "doc has a Rust code block with `fn main`, which clippy refuses (`needless_doctest_main`)",
                        "drop the `fn main() { .. }` wrapper: doctests already run inside one",
                    ));
                }
                if text.starts_with("#[test]") {
                    return Some((
                        i,
                        "doc has a Rust code block with `#[test]`, which clippy refuses (`test_attr_in_doctest`)",
                        "write the example without `#[test]`, or mark the block ```ignore",
                    ));
                }
                continue;
            }
            Kind::Code { rust: false } => continue,
            Kind::Fence => {
                item = None;
                quote = false;
                previous_blank = false;
                continue;
            }
            Kind::Text => {}
        }
        let indent = indent_of(line);
        if text.is_empty() {
            // A blank line ends lazy continuation: what follows is a new paragraph (or, when
            // indented, the item's next paragraph).
            quote = false;
            item = None;
            previous_blank = true;
            continue;
        }
        let starts_item = list_item_content(line).is_some()
            && (previous_blank || item.is_some() || interrupts(line));
        previous_blank = false;
        if starts_item {
            let content = list_item_content(line).expect("an item");
            if line[content..].trim_start().starts_with('[') && line.contains("]:") {
                return Some((
                    i,
                    "doc has a link reference definition inside a list item, which clippy refuses (`doc_nested_refdefs`)",
                    "move `[name]: url` out of the list, to a line of its own after it",
                ));
            }
            item = Some(content);
            quote = false;
            continue;
        }
        // Headings, HTML and tables end the paragraph rather than continue it.
        if text.starts_with(['#', '<', '|']) {
            item = None;
            quote = false;
            continue;
        }
        if text.starts_with('>') {
            quote = true;
            item = None;
            continue;
        }
        if quote {
            return Some((
                i,
                "doc continues a `>` quote on a line without `>`, which clippy refuses (`doc_lazy_continuation`)",
                "start the line with `>`, or leave a blank line before it",
            ));
        }
        if let Some(content) = item {
            if indent < content {
                return Some((
                    i,
                    "doc continues a list item on a line that is not indented to its text, which clippy refuses (`doc_lazy_continuation`)",
                    "indent the line to the item's text, or leave a blank line before it",
                ));
            }
            if indent > content {
                return Some((
                    i,
                    "doc indents a list item's continuation more than its text, which clippy refuses (`doc_overindented_list_items`)",
                    "indent the line exactly to the item's text",
                ));
            }
        }
    }
    None
}
