//! Just enough CommonMark to handle doc text from the manifest: which lines are inside fenced
//! code blocks (validation refuses an unclosed fence; the emitter never wraps code), and the
//! shapes clippy's doc lints refuse.

/// A fenced code block's opening line: its fence character, its length, and its info string.
fn opening_fence(line: &str) -> Option<(char, usize, &str)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
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
    Some((c, len, info))
}

/// Whether `line` closes a fence opened with `len` `c`s: at most 3 spaces of indentation, at
/// least as many of the same character, nothing else.
fn closes(line: &str, c: char, len: usize) -> bool {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return false;
    }
    let rest = line[indent..].trim_end();
    rest.len() >= len && rest.chars().all(|x| x == c)
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
}

/// The kind of each line, and the index of a fence left open at the end, if any.
pub fn classify(lines: &[&str]) -> (Vec<Kind>, Option<usize>) {
    let mut kinds = Vec::with_capacity(lines.len());
    let mut open: Option<(char, usize, bool, usize)> = None;
    for (i, line) in lines.iter().enumerate() {
        match open {
            Some((c, len, _, _)) if closes(line, c, len) => {
                kinds.push(Kind::Fence);
                open = None;
            }
            Some((_, _, rust, _)) => kinds.push(Kind::Code { rust }),
            None => match opening_fence(line) {
                Some((c, len, info)) => {
                    let lang = info.split([',', ' ']).next().unwrap_or("");
                    let rust = lang.is_empty() || lang == "rust" || info.contains("rust");
                    let rust = rust && !info.contains("ignore") && !info.contains("text");
                    kinds.push(Kind::Fence);
                    open = Some((c, len, rust, i));
                }
                None => kinds.push(Kind::Text),
            },
        }
    }
    (kinds, open.map(|(_, _, _, at)| at))
}

/// The width of a list item's marker and the space after it (`- `, `* `, `+ `, `1. `, `1) `),
/// counted from the line's start, when `line` starts a list item.
pub fn list_item_content(line: &str) -> Option<usize> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[indent..];
    if rest.starts_with("- ") || rest.starts_with("* ") || rest.starts_with("+ ") {
        return Some(indent + 2);
    }
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    if (1..=9).contains(&digits)
        && (rest[digits..].starts_with(". ") || rest[digits..].starts_with(") "))
    {
        return Some(indent + digits + 2);
    }
    None
}

/// What clippy's doc lints would refuse in `lines`: the index of the line and what is wrong.
pub fn lint(lines: &[&str], kinds: &[Kind]) -> Option<(usize, &'static str, &'static str)> {
    // The content column of the list item the current paragraph belongs to, if any.
    let mut item: Option<usize> = None;
    let mut quote = false;
    for (i, line) in lines.iter().enumerate() {
        match kinds[i] {
            Kind::Code { rust: true } => {
                let t = line.trim_start();
                if t.starts_with("fn main(") {
                    return Some((
                        i,
                        "doc has a Rust code block with `fn main`, which clippy refuses (`needless_doctest_main`)",
                        "drop the `fn main() { .. }` wrapper: doctests already run inside one",
                    ));
                }
                if t.starts_with("#[test]") {
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
                continue;
            }
            Kind::Text => {}
        }
        let indent = line.len() - line.trim_start_matches(' ').len();
        let text = line.trim();
        if text.is_empty() {
            quote = false;
            continue;
        }
        if let Some(content) = list_item_content(line) {
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
