//! [`Doc`]: code that is laid out on one line when it fits, and the constructors emitters build
//! it with; [`Writer`](super::Writer) renders it.

use super::*;

/// Code that is laid out on one line when it fits.
#[derive(Clone, Debug)]
pub(in crate::emit) enum Doc {
    /// Text that never breaks.
    Text(String),
    /// Parts printed one after another; each may break on its own.
    Cat(Vec<Doc>),
    /// A function signature: `head(params) -> ret end` (`end`: ` {` or `;`), laid out as
    /// rustfmt lays out signatures (see [`Writer`]'s rendering).
    Sig {
        head: Box<Doc>,
        params: Vec<Doc>,
        ret: Option<Box<Doc>>,
        end: String,
    },
    /// `open a, b close` on one line, or broken (see the module docs).
    List {
        open: &'static str,
        items: Vec<Doc>,
        close: &'static str,
        /// The most columns the items may take on one line (`None`: only the line width).
        limit: Option<usize>,
        /// Whether a broken list ends its last item with `,`.
        trailing_comma: bool,
        /// Whether a lone breakable item overflows (calls do; type argument lists do not).
        hug: bool,
    },
}

impl Doc {
    /// Width on one line, in characters.
    pub(in crate::emit) fn width(&self) -> usize {
        match self {
            Self::Text(t) => t.chars().count(),
            Self::Cat(parts) => parts.iter().map(Self::width).sum(),
            Self::List {
                open, items, close, ..
            } => open.len() + close.len() + items_width(items),
            Self::Sig {
                head,
                params,
                ret,
                end,
            } => {
                head.width()
                    + 2
                    + items_width(params)
                    + ret.as_ref().map_or(0, |r| 4 + r.width())
                    + end.chars().count()
            }
        }
    }

    /// Whether every list inside stays within its item limit on one line.
    pub(in crate::emit) fn flat_ok(&self) -> bool {
        match self {
            Self::Text(_) => true,
            Self::Cat(parts) => parts.iter().all(Self::flat_ok),
            // A lone array or tuple argument overflows: its own width limit applies, not the
            // call's (`Ok((a, b))` stays on one line while the tuple's items fit its limit).
            // So does a lone nested meta list in an attribute (`cfg(all(..))`, `not(any(..))`:
            // measured against rustfmt 1.9).
            Self::List { items, limit, .. } => {
                (limit.is_none_or(|limit| items_width(items) <= limit)
                    || matches!(
                        items.as_slice(),
                        [Self::List {
                            open: "[" | "(",
                            ..
                        }]
                    )
                    || (*limit == Some(ATTR_WIDTH)
                        && matches!(items.as_slice(), [Self::Cat(parts)]
                            if matches!(parts.last(), Some(Self::List { .. })))))
                    && items.iter().all(Self::flat_ok)
            }
            Self::Sig {
                head, params, ret, ..
            } => {
                head.flat_ok()
                    && params.iter().all(Self::flat_ok)
                    && ret.as_ref().is_none_or(|r| r.flat_ok())
            }
        }
    }

    /// Whether the doc can break (it holds a list).
    pub(in crate::emit) fn breakable(&self) -> bool {
        match self {
            Self::Text(_) => false,
            Self::Cat(parts) => parts.iter().any(Self::breakable),
            Self::List { .. } | Self::Sig { .. } => true,
        }
    }

    /// Appends the doc's one-line text to `out`.
    /// The document on one line.
    pub(in crate::emit) fn flat_text(&self) -> String {
        let mut out = String::new();
        self.write_flat(&mut out);
        out
    }

    pub(in crate::emit) fn write_flat_into(&self, out: &mut String) {
        self.write_flat(out);
    }

    pub(super) fn write_flat(&self, out: &mut String) {
        match self {
            Self::Text(t) => out.push_str(t),
            Self::Cat(parts) => parts.iter().for_each(|p| p.write_flat(out)),
            Self::List {
                open, items, close, ..
            } => {
                out.push_str(open);
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.write_flat(out);
                }
                out.push_str(close);
            }
            Self::Sig {
                head,
                params,
                ret,
                end,
            } => {
                head.write_flat(out);
                out.push('(');
                for (i, param) in params.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    param.write_flat(out);
                }
                out.push(')');
                if let Some(ret) = ret {
                    out.push_str(" -> ");
                    ret.write_flat(out);
                }
                out.push_str(end);
            }
        }
    }
}

pub(super) fn items_width(items: &[Doc]) -> usize {
    items.iter().map(Doc::width).sum::<usize>() + 2 * items.len().saturating_sub(1)
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
pub(in crate::emit) fn cat<const N: usize>(parts: [Doc; N]) -> Doc {
    Doc::Cat(parts.into())
}

/// `open items close` limited by the line width only: parameters, patterns, types.
pub(in crate::emit) fn list(open: &'static str, items: Vec<Doc>, close: &'static str) -> Doc {
    Doc::List {
        open,
        items,
        close,
        limit: None,
        trailing_comma: true,
        hug: true,
    }
}

/// `open items close` in a type: broken one item per line when it does not fit, never
/// overflowing a lone item (rustfmt breaks `Option<\n    Box<..>,\n>`).
pub(in crate::emit) fn type_list(open: &'static str, items: Vec<Doc>, close: &'static str) -> Doc {
    Doc::List {
        open,
        items,
        close,
        limit: None,
        trailing_comma: true,
        hug: false,
    }
}

/// `open items close` for call arguments, arrays and tuple expressions ([`CALL_WIDTH`]).
pub(in crate::emit) fn args(open: &'static str, items: Vec<Doc>, close: &'static str) -> Doc {
    Doc::List {
        open,
        items,
        close,
        limit: Some(CALL_WIDTH),
        trailing_comma: true,
        hug: true,
    }
}

/// `open items close` broken one item per line, always.
pub(in crate::emit) fn vertical(open: &'static str, items: Vec<Doc>, close: &'static str) -> Doc {
    if items.is_empty() {
        return format!("{open}{close}").into();
    }
    Doc::List {
        open,
        items,
        close,
        limit: Some(0),
        trailing_comma: true,
        hug: true,
    }
}

/// `(a, b)`: call arguments.
pub(in crate::emit) fn parens(items: impl IntoIterator<Item = impl Into<Doc>>) -> Doc {
    args("(", items.into_iter().map(Into::into).collect(), ")")
}

/// `{ a, b: c }` as rustfmt lays out a struct literal.
/// On one line when its fields take at most rustfmt's `struct_lit_width` (18 columns) and the
/// line has room; else one field per line.
pub(in crate::emit) fn struct_literal(items: Vec<Doc>) -> Doc {
    if items.is_empty() {
        return "{}".into();
    }
    Doc::List {
        // (The spaces inside the braces are dropped when the list breaks.)
        open: "{ ",
        items,
        close: " }",
        limit: Some(18),
        trailing_comma: true,
        hug: false,
    }
}

/// `name(a, b)`: a call of `callee`.
pub(in crate::emit) fn call(
    callee: impl Into<Doc>,
    items: impl IntoIterator<Item = impl Into<Doc>>,
) -> Doc {
    cat([callee.into(), parens(items)])
}

/// A cfg predicate (canonical text, as the IR holds it) as a doc that breaks like rustfmt
/// breaks it inside an attribute: `all(\n    a,\n    b\n)`, no trailing comma.
pub(in crate::emit) fn predicate(text: &str) -> Doc {
    meta(text, ATTR_WIDTH, false)
}

/// [`predicate`] inside a macro call in code (`cfg!(...)`): call rules.
pub(in crate::emit) fn predicate_in_code(text: &str) -> Doc {
    meta(text, CALL_WIDTH, true)
}

pub(super) fn meta(text: &str, limit: usize, trailing_comma: bool) -> Doc {
    let text = text.trim();
    let Some(open) = text.find('(') else {
        return text.into();
    };
    if !text.ends_with(')') || text[..open].contains(['"', '=', ' ']) {
        return text.into();
    }
    let inner = &text[open + 1..text.len() - 1];
    let mut items = Vec::new();
    let (mut depth, mut start, mut quoted) = (0usize, 0usize, false);
    let mut escaped = false;
    for (i, c) in inner.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                items.push(meta(&inner[start..i], limit, trailing_comma));
                start = i + 1;
            }
            _ => {}
        }
    }
    if !inner[start..].trim().is_empty() {
        items.push(meta(&inner[start..], limit, trailing_comma));
    }
    cat([
        text[..open].to_owned().into(),
        Doc::List {
            open: "(",
            items,
            close: ")",
            limit: Some(limit),
            trailing_comma,
            hug: true,
        },
    ])
}
