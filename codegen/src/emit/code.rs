//! A small layout engine for generated Rust. Emitters write whole lines into a [`Writer`]; what
//! may need wrapping (parameter lists, call arguments) is a [`Doc`], printed on one line when it
//! fits in [`WIDTH`] columns and otherwise broken one item per line with a trailing comma, the
//! layout rustfmt and prettyplease give such lists.
//!
//! Writing text directly keeps a render of a thousand ops well under a second even in the
//! unoptimised profile build scripts run in: building token streams and parsing them back with
//! `syn` for prettyplease took seconds there.

/// Maximum line width, as rustfmt's default.
pub(super) const WIDTH: usize = 100;
const INDENT: &str = "    ";

/// Code that is laid out on one line when it fits.
#[derive(Clone, Debug)]
pub(super) enum Doc {
    /// Text that never breaks.
    Text(String),
    /// Parts printed one after another; each may break on its own.
    Cat(Vec<Doc>),
    /// `open a, b close` on one line, or `open`, one item per line (each followed by `,`), and
    /// `close` on a line of its own.
    List {
        open: &'static str,
        items: Vec<Doc>,
        close: &'static str,
    },
}

impl Doc {
    /// Width on one line, in characters.
    pub(super) fn width(&self) -> usize {
        match self {
            Self::Text(t) => t.chars().count(),
            Self::Cat(parts) => parts.iter().map(Self::width).sum(),
            Self::List { open, items, close } => {
                open.len()
                    + close.len()
                    + items.iter().map(Self::width).sum::<usize>()
                    + 2 * items.len().saturating_sub(1)
            }
        }
    }

    fn write_flat(&self, out: &mut String) {
        match self {
            Self::Text(t) => out.push_str(t),
            Self::Cat(parts) => parts.iter().for_each(|p| p.write_flat(out)),
            Self::List { open, items, close } => {
                out.push_str(open);
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.write_flat(out);
                }
                out.push_str(close);
            }
        }
    }
}

impl From<&str> for Doc {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
}

impl From<String> for Doc {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

/// Parts printed one after another.
pub(super) fn cat<const N: usize>(parts: [Doc; N]) -> Doc {
    Doc::Cat(parts.into())
}

/// `open items close`, broken one item per line when it does not fit.
pub(super) fn list(open: &'static str, items: Vec<Doc>, close: &'static str) -> Doc {
    Doc::List { open, items, close }
}

/// `(a, b)`: a parenthesised list.
pub(super) fn parens(items: impl IntoIterator<Item = impl Into<Doc>>) -> Doc {
    list("(", items.into_iter().map(Into::into).collect(), ")")
}

/// Lines of generated code at a nesting depth.
#[derive(Default)]
pub(super) struct Writer {
    out: String,
    depth: usize,
    col: usize,
}

impl Writer {
    /// One line (which may wrap) at the current depth.
    pub(super) fn line(&mut self, doc: impl Into<Doc>) {
        self.start_line(self.depth);
        self.render(&doc.into(), self.depth, 0);
        self.out.push('\n');
    }

    /// A line that opens a block (ends in `{`): what follows is indented.
    pub(super) fn open(&mut self, doc: impl Into<Doc>) {
        self.line(doc);
        self.depth += 1;
    }

    /// Ends a block with `text` (usually `}`).
    pub(super) fn close(&mut self, text: &str) {
        self.depth -= 1;
        self.line(text);
    }

    /// Whether `doc` fits on one line at the current depth.
    pub(super) fn fits(&self, doc: &Doc) -> bool {
        self.depth * INDENT.len() + doc.width() <= WIDTH
    }

    /// Indents the lines that follow one level more (a continuation, not a block).
    pub(super) fn indent(&mut self) {
        self.depth += 1;
    }

    /// Undoes [`Writer::indent`].
    pub(super) fn dedent(&mut self) {
        self.depth -= 1;
    }

    /// An empty line.
    pub(super) fn blank(&mut self) {
        self.out.push('\n');
    }

    /// `///` lines. A line break inside a doc line (impossible from the manifest, which splits
    /// them) would end the comment, so carriage returns are dropped.
    pub(super) fn doc(&mut self, lines: &[String]) {
        for line in lines {
            let line = line.replace('\r', "");
            let line = line.trim_end();
            if line.is_empty() {
                self.line("///");
            } else {
                self.line(format!("/// {line}"));
            }
        }
    }

    /// `#[cfg(predicate)]`, when there is one.
    pub(super) fn cfg(&mut self, predicate: Option<&str>) {
        if let Some(p) = predicate {
            self.line(format!("#[cfg({p})]"));
        }
    }

    /// The text written so far.
    pub(super) fn finish(self) -> String {
        self.out
    }

    fn start_line(&mut self, depth: usize) {
        for _ in 0..depth {
            self.out.push_str(INDENT);
        }
        self.col = depth * INDENT.len();
    }

    fn push(&mut self, text: &str) {
        self.out.push_str(text);
        self.col += text.chars().count();
    }

    /// Prints `doc` from the current column; `trail` columns must stay free after it on the
    /// same line (the `,` or `?;` that follows).
    fn render(&mut self, doc: &Doc, depth: usize, trail: usize) {
        let width = doc.width();
        if self.col + width + trail <= WIDTH {
            let before = self.out.len();
            doc.write_flat(&mut self.out);
            self.col += self.out[before..].chars().count();
            return;
        }
        match doc {
            Doc::Text(text) => self.push(text),
            Doc::Cat(parts) => {
                let mut rest = width;
                for part in parts {
                    rest -= part.width();
                    self.render(part, depth, rest + trail);
                }
            }
            // One breakable item hugs the brackets, as rustfmt lays out `Ok(f(\n  ..\n))`.
            Doc::List { open, items, close }
                if items.len() == 1 && !matches!(items[0], Doc::Text(_)) =>
            {
                self.push(open);
                self.render(&items[0], depth, close.len() + trail);
                self.push(close);
            }
            Doc::List { open, items, close } => {
                self.push(open);
                for item in items {
                    self.out.push('\n');
                    self.start_line(depth + 1);
                    self.render(item, depth + 1, 1);
                    self.push(",");
                }
                self.out.push('\n');
                self.start_line(depth);
                self.push(close);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_stay_on_one_line_when_they_fit() {
        let mut w = Writer::default();
        w.open(cat([
            "fn f".into(),
            parens(["a: u8", "b: u8"]),
            " {".into(),
        ]));
        w.close("}");
        assert_eq!(w.finish(), "fn f(a: u8, b: u8) {\n}\n");
    }

    #[test]
    fn long_lists_break_one_item_per_line_and_nested_lists_only_when_needed() {
        let long = "x".repeat(90);
        let mut w = Writer::default();
        w.open("mod m {");
        w.line(cat([
            "call".into(),
            parens([
                Doc::from(format!("{long}_a")),
                cat(["inner".into(), parens(["1", "2"])]),
            ]),
            "?;".into(),
        ]));
        w.close("}");
        assert_eq!(
            w.finish(),
            format!("mod m {{\n    call(\n        {long}_a,\n        inner(1, 2),\n    )?;\n}}\n")
        );
    }

    #[test]
    fn the_trailing_text_counts_toward_the_width() {
        // 96 columns of call plus `?;` is 98: fits. Two more columns do not.
        let fits = "y".repeat(90);
        let mut w = Writer::default();
        w.line(cat(["f".into(), parens([fits.as_str()]), "?;".into()]));
        assert!(!w.finish().contains("(\n"));
        let too_long = "y".repeat(97);
        let mut w = Writer::default();
        w.line(cat(["f".into(), parens([too_long.as_str()]), "?;".into()]));
        assert_eq!(w.finish(), format!("f(\n    {too_long},\n)?;\n"));
    }
}
