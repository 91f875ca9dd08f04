//! Diagnostics: every manifest problem found by parsing or validation, with the byte span it
//! points at, rendered as `file:LINE:COL` messages; and [`Diagnostics`], the one context of a
//! run that gathers them and orders its report.

use std::fmt;
use std::ops::Range;

/// One problem in a manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Byte range in the manifest source that the problem points at.
    pub span: Range<usize>,
    /// Dotted path of the offending key, e.g. `op[2].inputs[0].tensor`.
    pub key: String,
    /// What is wrong, in one sentence.
    pub message: String,
    /// How to fix it.
    pub help: Option<String>,
    /// A warning: reported, but the manifest still generates.
    pub warning: bool,
    /// The section of the error reference (`burn_route_core::errors`) that explains it: one of
    /// `page`'s anchors. The rendered diagnostic links it for this version.
    pub page: &'static str,
}

/// The error reference's sections that diagnostics link (anchors of `burn_route_core::errors`;
/// a test checks that each exists).
pub mod page;

impl Diagnostic {
    /// A diagnostic without a `help` line yet. It links the section of its key's area
    /// (`page::of_area`), else the build-time part's introduction, until [`Diagnostic::page`]
    /// names its own.
    pub fn new(span: Range<usize>, key: impl Into<String>, message: impl Into<String>) -> Self {
        let key = key.into();
        Self {
            span,
            page: page::of_area(&key).unwrap_or(page::MANIFEST),
            key,
            message: cut_code(&message.into()),
            help: None,
            warning: false,
        }
    }

    /// Links section `anchor` of the error reference (one of `page`'s).
    #[must_use]
    pub fn page(mut self, anchor: &'static str) -> Self {
        self.page = anchor;
        self
    }

    /// The address of its section of the error reference, for this version.
    pub fn link(&self) -> burn_route_core::errors::Link {
        burn_route_core::errors::link(self.page)
    }

    /// Makes it a warning.
    #[must_use]
    pub fn warning(mut self) -> Self {
        self.warning = true;
        self
    }

    /// Adds the fix.
    #[must_use]
    pub fn help(mut self, help: impl Into<String>) -> Self {
        // (Not cut: a help's code is meant to be pasted, and it names what the generator knows.)
        self.help = Some(help.into());
        self
    }

    /// 1-based line and column (in characters) of the span start within `source`.
    pub fn line_col(&self, source: &str) -> (usize, usize) {
        line_col(source, at_end_of_last_line(source, self.span.start))
    }

    /// Renders the diagnostic as one line: `ops.toml:LINE:COL: `key`: message; help: fix`.
    pub fn render_line(&self, file: &str, source: &str) -> String {
        self.render_line_with(file, source, &LineIndex::new(source))
    }

    /// [`Diagnostic::render_line`] with the source's line index built once.
    pub fn render_line_with(&self, file: &str, source: &str, lines: &LineIndex) -> String {
        let (line, col) = lines.line_col(source, at_end_of_last_line(source, self.span.start));
        let mut out = format!(
            "{file}:{line}:{col}: `{}`: {}",
            cut(&self.key),
            self.message
        );
        if let Some(help) = &self.help {
            out.push_str("; help: ");
            out.push_str(help);
        }
        out
    }
}

impl Diagnostic {
    /// Renders the diagnostic like rustc: the message, `--> file:LINE:COL`, the source line with
    /// a caret under the span labelled with the key, and the `help:` line.
    pub fn render_snippet(&self, file: &str, source: &str) -> String {
        self.render_snippet_with(file, source, &LineIndex::new(source))
    }

    /// [`Diagnostic::render_snippet`] with the source's line index built once: only the lines
    /// the span covers are handed to the renderer, so rendering N diagnostics is linear in N.
    pub fn render_snippet_with(&self, file: &str, source: &str, lines: &LineIndex) -> String {
        use annotate_snippets::{AnnotationKind, Level, Renderer, Snippet};
        let start = floor_char_boundary(source, at_end_of_last_line(source, self.span.start));
        let mut end = at_end_of_last_line(source, self.span.end).max(start);
        while !source.is_char_boundary(end) {
            end += 1;
        }
        let first = lines.line(start);
        let last = lines.line(end);
        let from = lines.start_of(first);
        let to = lines.end_of(last, source);
        let excerpt = &source[from..to.max(from)];
        let label = format!("`{}`", cut(&self.key));
        let span = (start - from)..(end.min(to) - from);
        let level = if self.warning {
            Level::WARNING
        } else {
            Level::ERROR
        };
        let mut group = level.primary_title(&self.message).element(
            Snippet::source(excerpt)
                .line_start(first)
                .path(file)
                .annotation(AnnotationKind::Primary.span(span).label(&label)),
        );
        if let Some(help) = &self.help {
            group = group.element(Level::HELP.message(help));
        }
        let note = format!("see {}", self.link());
        group = group.element(Level::NOTE.message(&note));
        Renderer::plain().render(&[group])
    }
}

/// `at`, or, for a position at the very end of a text that ends with a line break (an error
/// such as an unterminated string runs there), the end of the last line: the "line" after the
/// final newline does not exist, and both renderings must name the same position.
fn at_end_of_last_line(source: &str, at: usize) -> usize {
    if at >= source.len() && source.ends_with('\n') {
        source.len() - 1
    } else {
        at.min(source.len())
    }
}

/// 1-based line and character column of byte offset `at` in `source`.
pub fn line_col(source: &str, at: usize) -> (usize, usize) {
    let at = floor_char_boundary(source, at.min(source.len()));
    let before = &source[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = source[line_start..at].chars().count() + 1;
    (line, col)
}

/// The line numbers of byte offsets in one text, found by binary search: validation asks for
/// one per op, and scanning from the start each time made a large manifest quadratic.
#[derive(Clone, Debug)]
pub struct LineIndex {
    /// Byte offset where each line starts.
    starts: Vec<usize>,
}

impl LineIndex {
    /// Indexes `source`.
    pub fn new(source: &str) -> Self {
        let starts = std::iter::once(0)
            .chain(source.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Self { starts }
    }

    /// The 1-based line of byte offset `at` (as [`line_col`] counts it).
    pub fn line(&self, at: usize) -> usize {
        self.starts.partition_point(|&start| start <= at)
    }

    /// The 1-based line and character column of byte offset `at` in `source` (the indexed
    /// text), as [`line_col`] gives them, without scanning from the start.
    pub fn line_col(&self, source: &str, at: usize) -> (usize, usize) {
        let at = floor_char_boundary(source, at.min(source.len()));
        let line = self.line(at);
        let col = source[self.start_of(line)..at].chars().count() + 1;
        (line, col)
    }

    /// Byte offset where 1-based line `line` starts.
    fn start_of(&self, line: usize) -> usize {
        self.starts[line.saturating_sub(1).min(self.starts.len() - 1)]
    }

    /// Byte offset where 1-based line `line` ends (before its line break).
    fn end_of(&self, line: usize, source: &str) -> usize {
        match self.starts.get(line) {
            Some(next) => next.saturating_sub(1),
            None => source.len(),
        }
    }
}

fn floor_char_boundary(s: &str, mut at: usize) -> usize {
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The key of every TOML syntax diagnostic; they sort before every other problem, which may
/// only follow from them.
pub const SYNTAX_KEY: &str = "<syntax>";

/// The stage of a run that found a diagnostic, which its place in the report depends on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// TOML text → the manifest's model (`parse`).
    #[default]
    Parse,
    /// The model → the IR: lowering, backward passes, the manifest-wide rules (`validate`).
    Validate,
    /// The generated cfgs against the consuming crate's `Cargo.toml` (`cargo`).
    Cargo,
}

/// What a stage returns where it failed: its problems are in the run's [`Diagnostics`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reported;

/// The diagnostics of one run: the `Builder` makes one, and every stage (parse, lowering, the
/// backward passes, the manifest-wide rules, the `Cargo.toml` checks) pushes its errors and
/// warnings into it. It owns the one order of a report ([`Diagnostics::errors`]).
#[derive(Clone, Debug, Default)]
pub struct Diagnostics {
    /// The stage pushing now.
    stage: Stage,
    /// Every error, with the stage that found it, in the order found.
    errors: Vec<(Stage, Diagnostic)>,
    /// Every warning, in the order found (reported in that order).
    warnings: Vec<Diagnostic>,
}

impl Diagnostics {
    /// An empty context, at the first stage.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks what is pushed from now on as found by `stage`.
    pub fn enter(&mut self, stage: Stage) {
        self.stage = stage;
    }

    /// Adds an error.
    pub fn push(&mut self, d: Diagnostic) {
        self.errors.push((self.stage, d));
    }

    /// Adds a warning: reported when the manifest still generates.
    pub fn warn(&mut self, d: Diagnostic) {
        self.warnings.push(d.warning());
    }

    /// Whether any error was pushed.
    pub fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }

    /// How many errors were pushed so far (a stage compares it before and after a step to
    /// learn whether the step reported one).
    pub fn error_count(&self) -> usize {
        self.errors.len()
    }

    /// The errors in the order a report shows them, each once. The manifest's come first:
    /// syntax errors (what follows may only be their consequence), then by position, then by
    /// key; where those tie, parsing's before validation's, and parsing's by where they end;
    /// otherwise in the order found. Then the `Cargo.toml` checks', in the order found.
    ///
    /// An unterminated string swallows the rest of the file: what the other checks say about
    /// the manifest after it is only its consequence (e.g. a key it swallowed is "missing"),
    /// so then only the syntax errors are reported.
    pub fn errors(&self) -> Vec<Diagnostic> {
        let mut errors: Vec<&(Stage, Diagnostic)> = self.errors.iter().collect();
        // (A stable sort: the order found decides the rest.)
        errors.sort_by(|(a_stage, a), (b_stage, b)| order(*a_stage, a).cmp(&order(*b_stage, b)));
        let mut errors: Vec<Diagnostic> = errors.into_iter().map(|(_, d)| d.clone()).collect();
        errors.dedup();
        if errors
            .iter()
            .any(|d| d.key == SYNTAX_KEY && d.message.contains("unterminated string"))
        {
            errors.retain(|d| d.key == SYNTAX_KEY);
        }
        errors
    }

    /// The errors as a report on `source`, the text of manifest `file`.
    pub fn report(&self, file: &str, source: &str) -> Report {
        Report {
            file: file.to_owned(),
            source: source.to_owned(),
            diagnostics: self.errors(),
        }
    }

    /// The warnings as a report on `source`, the text of manifest `file`, when there are any.
    pub fn warning_report(&self, file: &str, source: &str) -> Option<Report> {
        (!self.warnings.is_empty()).then(|| Report {
            file: file.to_owned(),
            source: source.to_owned(),
            diagnostics: self.warnings.clone(),
        })
    }
}

/// Where error `d`, found by `stage`, goes in a report (see [`Diagnostics::errors`]): the
/// `Cargo.toml` checks' after the manifest's; syntax errors first; by position and key; on a
/// tie, parsing's first, and parsing's by where they end.
fn order(stage: Stage, d: &Diagnostic) -> (bool, bool, usize, &str, Stage, usize) {
    if stage == Stage::Cargo {
        return (true, false, 0, "", stage, 0);
    }
    let end = if stage == Stage::Parse { d.span.end } else { 0 };
    (false, d.key != SYNTAX_KEY, d.span.start, &d.key, stage, end)
}

impl Extend<Diagnostic> for Diagnostics {
    /// Adds errors.
    fn extend<I: IntoIterator<Item = Diagnostic>>(&mut self, errors: I) {
        for d in errors {
            self.push(d);
        }
    }
}

/// Every diagnostic of one manifest, sorted by position, with the source they refer to.
#[derive(Clone, Debug)]
pub struct Report {
    /// The manifest's display name, e.g. `ops.toml`.
    pub file: String,
    /// The manifest source text.
    pub source: String,
    /// The problems, in source order.
    pub diagnostics: Vec<Diagnostic>,
}

/// How many diagnostics a report shows; the rest are counted in an "and N more" line.
pub const SHOWN: usize = 50;

impl Report {
    /// Every diagnostic rendered like rustc ([`Diagnostic::render_snippet`]), separated by
    /// blank lines, then a summary line. At most [`SHOWN`] are rendered.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for snippet in self.snippets() {
            out.push_str(&snippet);
            out.push_str("\n\n");
        }
        out.push_str(&self.summary());
        out
    }

    /// The first [`SHOWN`] diagnostics rendered like rustc, then an "and N more" line when
    /// some were left out.
    pub fn snippets(&self) -> Vec<String> {
        let index = LineIndex::new(&self.source);
        let mut out: Vec<String> = self
            .diagnostics
            .iter()
            .take(SHOWN)
            .map(|d| d.render_snippet_with(&self.file, &self.source, &index))
            .collect();
        out.extend(self.more().map(|more| {
            format!(
                "{more}\n  = note: see {}",
                burn_route_core::errors::link(page::TOO_MANY)
            )
        }));
        out
    }

    /// `error: ... and N more errors (not shown)` when more than [`SHOWN`] were found.
    fn more(&self) -> Option<String> {
        let more = self.diagnostics.len().saturating_sub(SHOWN);
        (more > 0).then(|| {
            format!(
                "error: ... and {more} more error{} in {} (not shown; fix the ones above first)",
                if more == 1 { "" } else { "s" },
                self.file
            )
        })
    }

    /// `N errors in FILE` (`N warnings in FILE` for a report of warnings only).
    pub fn summary(&self) -> String {
        let n = self.diagnostics.len();
        let what = if n > 0 && self.diagnostics.iter().all(|d| d.warning) {
            "warning"
        } else {
            "error"
        };
        format!(
            "{n} {what}{} in {}",
            if n == 1 { "" } else { "s" },
            self.file
        )
    }

    /// One line per diagnostic, as [`Diagnostic::render_line`] writes it (at most [`SHOWN`],
    /// then an "and N more" line).
    pub fn lines(&self) -> Vec<String> {
        let index = LineIndex::new(&self.source);
        let mut out: Vec<String> = self
            .diagnostics
            .iter()
            .take(SHOWN)
            .map(|d| d.render_line_with(&self.file, &self.source, &index))
            .collect();
        out.extend(self.more());
        out
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in self.lines() {
            writeln!(f, "{line}")?;
        }
        write!(f, "{}", self.summary())
    }
}

/// The closest candidate to `word` by edit distance, if it is close enough to be a likely typo.
pub fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let word = word.to_ascii_lowercase();
    candidates
        .iter()
        .map(|c| (edit_distance(&word, &c.to_ascii_lowercase()), *c))
        .filter(|(d, c)| *d <= (c.len().max(word.len()) / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Edit distance counting insertions, deletions, substitutions and swaps of adjacent characters
/// (optimal string alignment), so `itn` is one edit from `int`.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// The longest value (in characters) a message or help repeats whole; a longer one is cut in
/// the middle (the source snippet shows it).
pub const SHOWN_CHARS: usize = 60;

/// `value` as a message shows it: whole up to [`SHOWN_CHARS`] characters, else its first 40 and
/// last 16 around `…`.
pub fn cut(value: &str) -> String {
    let count = value.chars().count();
    if count <= SHOWN_CHARS {
        return value.to_owned();
    }
    let head: String = value.chars().take(SHOWN_CHARS - 20).collect();
    let tail: String = value.chars().skip(count - 16).collect();
    format!("{head}…{tail}")
}

/// `text` with each code span (between backticks) longer than [`SHOWN_CHARS`] [`cut`]: a
/// message repeats what the manifest says, and a 200 KB value must not make a 200 KB line.
pub fn cut_code(text: &str) -> String {
    let mut parts = text.split('`');
    let mut out = String::with_capacity(text.len().min(4096));
    if let Some(first) = parts.next() {
        out.push_str(first);
    }
    let rest: Vec<&str> = parts.collect();
    for (i, part) in rest.iter().enumerate() {
        out.push('`');
        // Odd parts are inside backticks, when a closing one follows.
        if i % 2 == 0 && i + 1 < rest.len() {
            out.push_str(&cut(part));
        } else {
            out.push_str(part);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based_and_count_chars() {
        let src = "a = 1\nbé = 2\n";
        assert_eq!(line_col(src, 0), (1, 1));
        assert_eq!(line_col(src, 6), (2, 1));
        // `=` after the two-byte `é`.
        assert_eq!(line_col(src, src.find('=').unwrap()), (1, 3));
        assert_eq!(line_col(src, src.rfind('=').unwrap()), (2, 4));
        let index = LineIndex::new(src);
        for at in 0..=src.len() {
            assert_eq!(index.line(at), line_col(src, at).0, "offset {at}");
        }
    }

    #[test]
    fn snippets_point_at_the_span() {
        let source = "[routing]\ntrait = \"My Ops\"\n";
        let d = Diagnostic::new(18..26, "routing.trait", "`My Ops` is not a Rust identifier")
            .help("use a trait name such as \"RoutedOps\"");
        assert_eq!(
            d.render_snippet("ops.toml", source),
            "error: `My Ops` is not a Rust identifier\n --> ops.toml:2:9\n  |\n2 | trait = \"My Ops\"\n  |         ^^^^^^^^ `routing.trait`\n  |\n  = help: use a trait name such as \"RoutedOps\"\n  = note: see https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#build-time-manifest-errors"
        );
    }

    #[test]
    fn one_context_orders_the_report() {
        let d = |span: Range<usize>, key: &str| Diagnostic::new(span, key, key.to_owned());
        let mut diags = Diagnostics::new();
        diags.extend([
            d(3..9, "a"),
            d(3..5, "a"),
            d(0..1, "b"),
            d(9..9, SYNTAX_KEY),
        ]);
        diags.enter(Stage::Validate);
        diags.extend([d(3..4, "a"), d(0..1, "b"), d(3..4, "a")]);
        diags.warn(d(0..0, "w"));
        let shown = |diags: &Diagnostics| -> Vec<(usize, usize, String)> {
            let errors = diags.errors().into_iter();
            errors.map(|d| (d.span.start, d.span.end, d.key)).collect()
        };
        let expected = [
            (9, 9, SYNTAX_KEY),
            (0, 1, "b"),
            (3, 5, "a"),
            (3, 9, "a"),
            (3, 4, "a"),
        ];
        let expected: Vec<_> = expected.map(|(s, e, k)| (s, e, k.to_owned())).into();
        assert_eq!(shown(&diags), expected);
        assert!(
            diags
                .warning_report("f", "")
                .is_some_and(|r| r.diagnostics[0].warning)
        );
        diags.enter(Stage::Parse);
        diags.push(Diagnostic::new(5..5, SYNTAX_KEY, "unterminated string"));
        assert_eq!(shown(&diags).len(), 2, "only the syntax errors");
    }

    #[test]
    fn suggestions_only_for_close_words() {
        assert_eq!(
            did_you_mean("outptu", &["output", "inputs"]),
            Some("output")
        );
        assert_eq!(
            did_you_mean("flaot", &["float", "int", "bool"]),
            Some("float")
        );
        assert_eq!(did_you_mean("itn", &["float", "int", "bool"]), Some("int"));
        assert_eq!(
            did_you_mean("Flx", &["Flex", "Cube", "Remote"]),
            Some("Flex")
        );
        assert_eq!(did_you_mean("zzz", &["float", "int", "bool"]), None);
    }
}
