//! A small layout engine for generated Rust, which lays out what the generator writes the way
//! `rustfmt` (edition 2024, default options) does. Emitters write whole lines into a [`Writer`];
//! what may need wrapping (parameter lists, call arguments, arrays, tuples, cfg predicates) is a
//! [`Doc`].
//!
//! The rules are rustfmt's, for the shapes the generator writes:
//!
//! - A list stays on one line when it fits in [`WIDTH`] columns and, for call arguments, arrays
//!   and tuples, when its items take at most [`CALL_WIDTH`] columns ([`ATTR_WIDTH`] inside an
//!   attribute): rustfmt's `fn_call_width`, `array_width` and `attr_fn_like_width`.
//! - Otherwise a list of one call (or list) "overflows": the brackets hug the item, which breaks
//!   itself, as in `Ok(f(\n    a,\n    b,\n))`.
//! - Otherwise it is broken one item per line, each followed by `,` (no `,` in attributes).
//! - `let x = rhs;` moves `rhs` to the next line when it then fits on one line and would
//!   otherwise break ([`Writer::assign`]); a match arm's body goes into a block unless it is a
//!   call that must break anyway ([`Writer::arm`]).
//!
//! Writing text directly keeps a render of a thousand ops well under a second even in the
//! unoptimised profile build scripts run in: formatting with `syn` and prettyplease took seconds
//! there (3.4 s for 1,000 ops, measured).

/// Maximum line width, as rustfmt's default.
pub(super) const WIDTH: usize = 100;
/// rustfmt's `fn_call_width` and `array_width`: the most columns the items of a call, an array
/// or a tuple take on one line.
pub(super) const CALL_WIDTH: usize = 60;
/// rustfmt's `attr_fn_like_width`: the same inside an attribute.
pub(super) const ATTR_WIDTH: usize = 70;
/// One level of indentation.
pub(super) const INDENT: &str = "    ";

pub(super) use doc::*;
pub(super) use infix::infix;
use infix::{is_infix, is_infix_operator};

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
        self.render(&doc.into(), self.depth, 0, false);
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

    /// `head rhs tail` (e.g. `let x = ` rhs `;`), with rustfmt's choice for the right-hand
    /// side: on the same line when it fits; on the next line, indented, when it fits there on
    /// one line but would break here; else broken here.
    pub(super) fn assign(&mut self, head: impl Into<Doc>, rhs: Doc, tail: &str) {
        let head = head.into();
        let whole = cat([head.clone(), rhs.clone(), tail.into()]);
        if self.fits(&whole) && whole.flat_ok() {
            self.line(whole);
            return;
        }
        let next_line = (self.depth + 1) * INDENT.len() + rhs.width() + tail.len();
        // A call whose head (`path(`) does not fit after `head` breaks on the next line.
        let head_too_long = is_call(&rhs)
            && self.depth * INDENT.len() + head.width() + head_width(&rhs) > WIDTH
            && (self.depth + 1) * INDENT.len() + head_width(&rhs) <= WIDTH;
        if (rhs.flat_ok() && next_line <= WIDTH)
            || head_too_long
            || self.prefer_next_line(&whole, &rhs, tail)
        {
            let head_text = {
                let mut t = String::new();
                head.write_flat(&mut t);
                t.trim_end().to_owned()
            };
            self.line(head_text);
            self.indent();
            self.line(cat([rhs, tail.into()]));
            self.dedent();
            return;
        }
        self.line(whole);
    }

    /// rustfmt's `prefer_next_line` for a right-hand side that breaks either way: it moves to
    /// the next line when it takes at least two fewer lines there, or when its first line here
    /// ends in an opening bracket and there does not (`let x = f(\n    g(\n` against
    /// `let x =\n    f(g(\n`).
    fn prefer_next_line(&self, whole: &Doc, rhs: &Doc, tail: &str) -> bool {
        // Only a call of one call (`f(g(..))`) lays out in fewer lines on the next line, where
        // the inner call can hug the outer: the probes below are not paid for the others.
        fn nests(doc: &Doc) -> bool {
            match doc {
                Doc::Cat(parts) => parts.iter().any(nests),
                Doc::List {
                    open: "(", items, ..
                } => items.len() == 1 && items[0].breakable(),
                _ => false,
            }
        }
        if !nests(rhs) {
            return false;
        }
        let probe = |doc: &Doc, depth: usize| {
            let mut w = Self {
                depth,
                ..Self::default()
            };
            w.line(doc.clone());
            w.out
        };
        let here = probe(whole, self.depth);
        let there = probe(&cat([rhs.clone(), tail.into()]), self.depth + 1);
        if there.lines().any(|l| l.chars().count() > WIDTH) {
            return false;
        }
        let first_ends = |text: &str, c: char| text.lines().next().is_some_and(|l| l.ends_with(c));
        here.lines().count() > there.lines().count() + 1
            || ['(', '{', '[']
                .into_iter()
                .any(|c| first_ends(&here, c) && !first_ends(&there, c))
    }

    /// `pattern => expr,` on one line when it fits; `pattern => call(` with the call's items
    /// broken when the call must break anyway; else `pattern => {` with the expression in a
    /// block.
    pub(super) fn arm(&mut self, pattern: &str, expr: Doc) {
        let one_line = cat([format!("{pattern} => ").into(), expr.clone(), ",".into()]);
        let flat = self.fits(&one_line) && one_line.flat_ok();
        // rustfmt moves the expression into a block only when it fits there on one line.
        let fits_in_block =
            (self.depth + 1) * INDENT.len() + expr.width() <= WIDTH && expr.flat_ok();
        let overflows = !fits_in_block
            && is_call(&expr)
            // (rustfmt keeps a column for the arm's comma: ` => ` 4, `,` 1.)
            && self.depth * INDENT.len() + pattern.len() + 4 + head_width(&expr) < WIDTH;
        if flat || overflows {
            self.line(one_line);
        } else {
            self.open(format!("{pattern} => {{"));
            self.line(expr);
            self.close("}");
        }
    }

    /// `head for ty {}` (`empty`) or `head for ty {` opening a block, with rustfmt's layout when
    /// it does not fit: `for ty` on its own indented line, or, when the generics and the trait do
    /// not fit together either, the trait too; the brace then goes on a line of its own.
    pub(super) fn impl_block(&mut self, head: &str, ty: &str, empty: bool) {
        let brace = if empty { " {}" } else { " {" };
        let one_line = format!("{head} for {ty}{brace}");
        // rustfmt measures an empty body's line without its closing `}`.
        if self.fits(&Doc::from(format!("{head} for {ty} {{"))) {
            if empty {
                self.line(one_line);
            } else {
                self.open(one_line);
            }
            return;
        }
        // `impl<..> Trait`: the generics end at the `>` that closes the first `<`.
        let split = head.find('<').and_then(|open| {
            let mut depth = 0;
            head[open..].char_indices().find_map(|(i, c)| {
                match c {
                    '<' => depth += 1,
                    '>' => depth -= 1,
                    _ => {}
                }
                (depth == 0).then_some(open + i + 1)
            })
        });
        match split {
            Some(at) if !self.fits(&Doc::from(head)) => {
                self.line(&head[..at]);
                self.indent();
                self.line(format!("{} for {ty}", head[at..].trim_start()));
                self.dedent();
            }
            _ => {
                self.line(head);
                self.indent();
                self.line(format!("for {ty}"));
                self.dedent();
            }
        }
        if empty {
            self.line("{");
            self.line("}");
        } else {
            self.open("{");
        }
    }

    /// `match scrutinee {`, with rustfmt's layout when it does not fit: the scrutinee on one
    /// line and the `{` on the next when that fits, else the scrutinee broken.
    pub(super) fn open_match(&mut self, scrutinee: Doc) {
        let whole = cat(["match ".into(), scrutinee.clone(), " {".into()]);
        let bare = cat(["match ".into(), scrutinee]);
        if (self.fits(&whole) || !self.fits(&bare)) || !bare.flat_ok() {
            self.open(whole);
        } else {
            self.line(bare);
            self.open("{");
        }
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

    /// `///` lines, each wrapped at [`WIDTH`] columns at the current depth (a long word stays
    /// whole). Lines inside code fences, table rows and headings are kept as they are; a wrapped
    /// list item continues under its text. Validation has refused line breaks inside a line.
    pub(super) fn doc(&mut self, lines: &[String]) {
        let raw: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (kinds, _) = crate::markdown::classify(&raw);
        for (line, kind) in lines.iter().zip(kinds) {
            let line = line.trim_end();
            let trimmed = line.trim_start();
            if line.is_empty() {
                self.line("///");
                continue;
            }
            let room = WIDTH.saturating_sub(self.depth * INDENT.len() + 4);
            if kind != crate::markdown::Kind::Text
                || trimmed.starts_with('|')
                || trimmed.starts_with('#')
                || line.chars().count() <= room
            {
                self.line(format!("/// {line}"));
                continue;
            }
            for wrapped in wrap(line, room) {
                self.line(format!("/// {wrapped}"));
            }
        }
    }

    /// `#[cfg(predicate)]`, when there is one.
    pub(super) fn cfg(&mut self, predicate: Option<&str>) {
        if let Some(p) = predicate {
            self.line(cat(["#[cfg".into(), attr_args(p), "]".into()]));
        }
    }

    /// `#[cfg_attr(not(predicate), allow(lint))]`.
    pub(super) fn cfg_attr_allow(&mut self, predicate: &str, lint: &str) {
        let args = Doc::List {
            open: "(",
            items: vec![predicate_not(predicate), format!("allow({lint})").into()],
            close: ")",
            limit: Some(ATTR_WIDTH),
            trailing_comma: false,
            hug: true,
        };
        self.line(cat(["#[cfg_attr".into(), args, "]".into()]));
    }

    /// Text another writer rendered at depth 0 (whole lines), written at depth 0.
    pub(super) fn append(&mut self, text: &str) {
        debug_assert!(self.depth == 0 && text.ends_with('\n'));
        self.out.push_str(text);
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
    /// same line (the `,` or `?;` that follows). `must_break`: the doc may not stay on one line
    /// (it is the overflowing item of a list that did not fit).
    fn render(&mut self, doc: &Doc, depth: usize, trail: usize, must_break: bool) {
        let width = doc.width();
        // rustfmt keeps a declaration with a return type (`fn f(..) -> R;`) on one line only
        // up to 99 columns (one without, up to 100).
        let room = match doc {
            Doc::Sig {
                end, ret: Some(_), ..
            } if end == ";" => WIDTH - 1,
            _ => WIDTH,
        };
        if !must_break && doc.flat_ok() && self.col + width + trail <= room {
            let before = self.out.len();
            doc.write_flat(&mut self.out);
            self.col += self.out[before..].chars().count();
            return;
        }
        match doc {
            Doc::Text(text) => self.push(text),
            Doc::Cat(parts) if is_infix(parts) => self.render_infix(parts, depth, trail),
            Doc::Cat(parts) => {
                let last_breakable = parts.iter().rposition(Doc::breakable);
                let mut rest = width;
                for (i, part) in parts.iter().enumerate() {
                    rest -= part.width();
                    self.render(
                        part,
                        depth,
                        rest + trail,
                        must_break && Some(i) == last_breakable,
                    );
                }
            }
            Doc::Sig {
                head,
                params,
                ret,
                end,
            } => self.render_signature(head, params, ret.as_deref(), end, depth),
            // One call (or list) overflows: the brackets hug it, and it breaks itself.
            Doc::List {
                open,
                items,
                close,
                limit,
                hug,
                ..
            } if items.len() == 1
                && items[0].breakable()
                && *limit != Some(0)
                && *hug
                && self.nested_call_fits(&items[0], open.len() + close.len() + trail) =>
            {
                self.push(open);
                self.render(&items[0], depth, close.len() + trail, true);
                self.push(close);
            }
            // Call arguments that are all short and simple (rustfmt's
            // `short_array_element_width_threshold`: names, field accesses, literals, `&`/`-`
            // of them, each at most 10 columns) fill lines, as rustfmt's mixed layout does.
            Doc::List {
                open,
                items,
                close,
                limit: Some(CALL_WIDTH),
                trailing_comma: true,
                ..
            } if short_simple(items) => {
                self.push(open);
                let flat: Vec<String> = items.iter().map(Doc::flat_text).collect();
                self.out.push('\n');
                self.start_line(depth + 1);
                for (i, item) in flat.iter().enumerate() {
                    if i > 0 {
                        if self.col + 1 + item.len() + 1 > WIDTH {
                            self.out.push('\n');
                            self.start_line(depth + 1);
                        } else {
                            self.push(" ");
                        }
                    }
                    self.push(item);
                    self.push(",");
                }
                self.out.push('\n');
                self.start_line(depth);
                self.push(close);
            }
            Doc::List {
                open,
                items,
                close,
                trailing_comma,
                ..
            } => {
                self.push(open.trim_end());
                for (i, item) in items.iter().enumerate() {
                    self.out.push('\n');
                    self.start_line(depth + 1);
                    self.render(item, depth + 1, 1, false);
                    if *trailing_comma || i + 1 < items.len() {
                        self.push(",");
                    }
                }
                self.out.push('\n');
                self.start_line(depth);
                self.push(close.trim_start());
            }
        }
    }
}

impl Writer {
    /// Whether a lone argument that is itself a call (or a macro call) may overflow from the
    /// current column, `around` columns of brackets and trail aside: rustfmt rewrites such a
    /// nested call in at most [`CALL_WIDTH`] columns, so its head (callee and `(`) must fit in
    /// those, else the outer list breaks and the call goes on a line of its own.
    fn nested_call_fits(&self, item: &Doc, around: usize) -> bool {
        // A binary expression (`a(..) + 1.0`) never overflows: rustfmt gives it a line of its own.
        // Nor does a parenthesised expression, negated or not (`-(a(..) - b)`; `-a(..)` does).
        let parenthesised = |doc: &Doc| match doc {
            Doc::Cat(parts) => matches!(parts.first(), Some(Doc::Text(t)) if t == "("),
            _ => false,
        };
        if let Doc::Cat(parts) = item
            && (parts.iter().any(is_infix_operator)
                || parenthesised(item)
                || (matches!(parts.first(), Some(Doc::Text(t)) if t == "-")
                    && parts.get(1).is_some_and(parenthesised)))
        {
            return false;
        }
        // A negated call (`-f(..)`) overflows as the call does, one column further.
        if let Doc::Cat(parts) = item
            && let [Doc::Text(minus), call] = parts.as_slice()
            && minus == "-"
        {
            return self.nested_call_fits(call, around + 1);
        }
        let head = match item {
            Doc::Cat(parts) => match parts.split_last() {
                Some((Doc::List { open, .. }, callee)) if open.ends_with('(') => {
                    callee.iter().map(Doc::width).sum::<usize>() + open.len()
                }
                _ => return true,
            },
            Doc::List { open, .. } if open.ends_with("![") => open.len(),
            _ => return true,
        };
        head <= CALL_WIDTH.min(WIDTH.saturating_sub(self.col + around))
    }

    /// A signature that does not fit on one line, as rustfmt lays it out:
    /// - a declaration (`;`) whose `head(params)` fits keeps it, with `-> R;` on the next line;
    /// - otherwise the parameters go one per line, then `) -> R end`; when that does not fit
    ///   but `) -> R` does, the `{` goes on a line of its own; else `R` breaks.
    fn render_signature(
        &mut self,
        head: &Doc,
        params: &[Doc],
        ret: Option<&Doc>,
        end: &str,
        depth: usize,
    ) {
        let params_list = list("(", params.to_vec(), ")");
        if let (";", Some(ret)) = (end, ret) {
            let first = cat([head.clone(), params_list.clone()]);
            // (Measured against rustfmt 1.9: a declaration of exactly 100 columns moves its
            // `-> R;` to the next line; a longer one breaks its parameters.)
            let whole = self.col + first.width() + 4 + ret.width() + 1;
            if first.flat_ok() && ret.flat_ok() && whole == WIDTH {
                self.render(&first, depth, 0, false);
                self.out.push('\n');
                self.start_line(depth);
                self.push("-> ");
                self.render(ret, depth, 1, false);
                self.push(";");
                return;
            }
        }
        self.render(head, depth, 1, false);
        self.push("(");
        // No parameters: nothing to break, `()` stays together.
        if !params.is_empty() {
            for param in params {
                self.out.push('\n');
                self.start_line(depth + 1);
                self.render(param, depth + 1, 1, false);
                self.push(",");
            }
            self.out.push('\n');
            self.start_line(depth);
        }
        self.push(")");
        let Some(ret) = ret else {
            self.push(end);
            return;
        };
        // (Measured against rustfmt 1.9: after broken parameters, `) -> R {` stays on one line
        // up to 96 columns; after `()`, up to 100. Else the `{` goes on a line of its own.)
        let room = if params.is_empty() { WIDTH } else { WIDTH - 4 };
        let fits = |w: &Self, extra: usize, room: usize| {
            ret.flat_ok() && w.col + 4 + ret.width() + extra <= room
        };
        if params.is_empty()
            && !fits(self, end.chars().count(), room)
            && !(end == " {" && fits(self, 0, WIDTH + 1))
            && ret.flat_ok()
            && depth * INDENT.len() + 3 + ret.width() + end.chars().count() <= WIDTH
        {
            // `fn f()` then `-> R {` on the next line, at the signature's indentation.
            self.out.push('\n');
            self.start_line(depth);
            self.push("-> ");
            self.render(ret, depth, end.chars().count(), false);
            self.push(end);
            return;
        }
        if params.is_empty()
            && !fits(self, end.chars().count(), room)
            && self.col + 4 + head_width(ret) > WIDTH
        {
            // `fn f()` then `-> R<` broken, when even the return type's first line does not
            // fit after `()`.
            self.out.push('\n');
            self.start_line(depth);
            self.push("-> ");
            self.render(ret, depth, end.chars().count(), false);
            self.push(end);
            return;
        }
        if fits(self, end.chars().count(), room) {
            self.push(" -> ");
            self.render(ret, depth, end.chars().count(), false);
            self.push(end);
        } else if end == " {" && fits(self, 0, if params.is_empty() { WIDTH + 1 } else { WIDTH }) {
            self.push(" -> ");
            let mut flat = String::new();
            ret.write_flat(&mut flat);
            self.push(&flat);
            self.out.push('\n');
            self.start_line(depth);
            self.push("{");
        } else {
            self.push(" -> ");
            self.render(ret, depth, end.chars().count(), true);
            self.push(end);
        }
    }
}

/// `(predicate)` of an attribute.
fn attr_args(predicate: &str) -> Doc {
    Doc::List {
        open: "(",
        items: vec![self::predicate(predicate)],
        close: ")",
        limit: Some(ATTR_WIDTH),
        trailing_comma: false,
        hug: true,
    }
}

/// `not(predicate)`.
fn predicate_not(predicate: &str) -> Doc {
    cat(["not".into(), attr_args(predicate)])
}

/// Whether `doc` is a call: text followed by an argument list (possibly with text after it,
/// such as `?`).
fn is_call(doc: &Doc) -> bool {
    match doc {
        Doc::Cat(parts) => {
            matches!(parts.first(), Some(Doc::Text(_)))
                && parts
                    .iter()
                    .any(|p| matches!(p, Doc::List { open: "(", .. }))
        }
        _ => false,
    }
}

/// Width of a call up to and including its opening bracket.
fn head_width(doc: &Doc) -> usize {
    match doc {
        Doc::Text(t) => t.chars().count(),
        Doc::List { open, .. } => open.len(),
        Doc::Sig { head, .. } => head.width() + 1,
        Doc::Cat(parts) => {
            let mut width = 0;
            for part in parts {
                if part.breakable() {
                    return width + head_width(part);
                }
                width += part.width();
            }
            width
        }
    }
}

/// `line` broken at spaces into pieces of at most `room` characters, so that the wrapped text
/// means what the line meant in Markdown: continuation lines of a list item (`- `, `* `, `1. `)
/// are indented under its text, those of a block quote repeat its `>` markers (and a list's
/// indentation inside it), and no break puts a word that would open a block (a list marker,
/// `>`, `#`, a code fence, a table or HTML line, a setext underline) at the start of a line:
/// such a word stays on the line before.
fn wrap(line: &str, room: usize) -> Vec<String> {
    let indent_len = line.len() - line.trim_start().len();
    let body = line.trim_start();
    // `> > text`: the quote markers, then the text inside the quote.
    let quote_len = body.len() - body.trim_start_matches(['>', ' ']).len();
    let (quote, inner) = body.split_at(quote_len);
    let continuation = if quote.is_empty() {
        " ".repeat(crate::markdown::list_item_content(line).unwrap_or(indent_len))
    } else {
        let inner_content = crate::markdown::list_item_content(inner).unwrap_or(0);
        format!(
            "{}{}{}",
            &line[..indent_len],
            quote.trim_end().to_owned() + " ",
            " ".repeat(inner_content)
        )
    };
    // Words glued to the word before them: a break there would open a block.
    let mut units: Vec<String> = Vec::new();
    for (i, word) in inner.split(' ').enumerate() {
        match units.last_mut() {
            Some(last) if opens_block(word) || word.is_empty() => {
                last.push(' ');
                last.push_str(word);
            }
            _ if i == 0 => units.push(format!("{quote}{word}")),
            _ => units.push(word.to_owned()),
        }
    }
    let mut out = Vec::new();
    let mut current = line[..indent_len].to_owned();
    let mut current_len = indent_len;
    let mut first_word = true;
    for unit in units {
        let unit_len = unit.chars().count();
        if !first_word && current_len + 1 + unit_len > room {
            out.push(std::mem::take(&mut current).trim_end().to_owned());
            current.push_str(&continuation);
            current_len = continuation.chars().count();
            first_word = true;
        }
        if !first_word {
            current.push(' ');
            current_len += 1;
        }
        current.push_str(&unit);
        current_len += unit_len;
        first_word = false;
    }
    out.push(current.trim_end().to_owned());
    out
}

/// Whether `word` at the start of a doc line could open or change a Markdown block.
fn opens_block(word: &str) -> bool {
    let only = |c: char| !word.is_empty() && word.chars().all(|w| w == c);
    let digits = word.chars().take_while(char::is_ascii_digit).count();
    // List markers, thematic breaks and setext underlines (`-`, `1.`, `***`, `===`), headings
    // (`##`), quotes, tables, HTML blocks and code fences.
    ["-", "*", "+"].contains(&word)
        || ['-', '=', '*', '_', '#'].into_iter().any(only)
        || (digits > 0 && matches!(&word[digits..], "." | ")"))
        || word.starts_with(['>', '|', '<'])
        || word.starts_with("```")
        || word.starts_with("~~~")
}

mod doc;
mod infix;

#[cfg(test)]
mod tests;

/// Whether every item is a simple expression in rustfmt's sense (a name, a field access or
/// index of one, a literal, or `&`/`-` of one; not a path with `::`, a call or a macro) of at
/// most 10 columns.
fn short_simple(items: &[Doc]) -> bool {
    items.len() > 1
        && items.iter().all(|item| {
            let Doc::Text(text) = item else { return false };
            let body = text.trim_start_matches(['&', '-']);
            text.chars().count() <= 10
                && !body.is_empty()
                && !body.contains("::")
                && body
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']' | '"'))
        })
}
