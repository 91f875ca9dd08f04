//! Binary operator chains (`a + b + c`) in the layout: built by [`infix`], laid out as rustfmt
//! lays out binary expressions.

use super::{Doc, INDENT, WIDTH, Writer};

/// `lhs op rhs`, a binary expression whose operands may break (see [`Writer`]'s overflow rule).
/// A left operand that is a chain of the same operator, unparenthesised, is extended
/// (`a + b + c` is one chain, as rustfmt flattens it).
pub(in crate::emit) fn infix(lhs: Doc, op: &str, rhs: Doc) -> Doc {
    let op = Doc::Text(format!(" {op} "));
    match lhs {
        Doc::Cat(mut parts)
            if is_infix(&parts)
                && matches!((&parts[1], &op), (Doc::Text(a), Doc::Text(b)) if a == b) =>
        {
            parts.push(op);
            parts.push(rhs);
            Doc::Cat(parts)
        }
        lhs => Doc::Cat(vec![lhs, op, rhs]),
    }
}

/// Whether `parts` are an [`infix`] chain: operands with one operator between each two.
pub(super) fn is_infix(parts: &[Doc]) -> bool {
    parts.len() >= 3
        && parts.len() % 2 == 1
        && parts.iter().skip(1).step_by(2).all(is_infix_operator)
        && parts.iter().step_by(2).all(|p| !is_infix_operator(p))
}

/// Whether `doc` is the operator part of an [`infix`] doc.
pub(super) fn is_infix_operator(doc: &Doc) -> bool {
    matches!(doc, Doc::Text(t) if t.len() >= 3 && t.starts_with(' ') && t.ends_with(' ')
        && t.trim().chars().all(|c| "+-*/%<>=!&|^".contains(c)))
}

impl Writer {
    /// A chain of one binary operator (`a + b + c`, see [`infix`]) that does not fit on one
    /// line, as rustfmt lays it out: on one line if only the last operand breaks and what comes
    /// before it takes at most 4 columns; otherwise the first operand, then each next one
    /// either after ` op ` on the same line, when that line has not passed the operands'
    /// indentation (rustfmt avoids an orphan after a closing `)`), or on a line of its own,
    /// indented one level and led by its operator.
    pub(super) fn render_infix(&mut self, parts: &[Doc], depth: usize, trail: usize) {
        let (last, before) = parts.split_last().expect("an infix chain");
        let prefix: usize = before.iter().map(Doc::width).sum();
        let last_text = last.flat_text();
        if before.iter().all(Doc::flat_ok) && prefix <= INDENT.len() && !last_text.starts_with('(')
        {
            // Tried, and kept only when every line it writes fits (rustfmt checks the whole
            // result of this layout against the line width; a long string literal can fail it).
            let (len, col) = (self.out.len(), self.col);
            for part in before {
                part.write_flat(&mut self.out);
            }
            self.col += prefix;
            self.render(last, depth, trail, false);
            let written = &self.out[len..];
            let first = col + written.lines().next().map_or(0, |l| l.chars().count());
            if first + trail <= WIDTH && written.lines().skip(1).all(|l| l.chars().count() <= WIDTH)
            {
                return;
            }
            self.out.truncate(len);
            self.col = col;
        }
        let nested = (depth + 1) * INDENT.len();
        self.render(&parts[0], depth, trail, false);
        for pair in parts[1..].chunks(2) {
            let [Doc::Text(op), operand] = pair else {
                unreachable!("an infix chain alternates operands and operators")
            };
            let op = op.trim();
            if self.col <= nested {
                self.push(" ");
                self.push(op);
                self.push(" ");
                self.render(operand, depth, trail, false);
            } else {
                self.out.push('\n');
                self.start_line(depth + 1);
                self.push(op);
                self.push(" ");
                self.render(operand, depth + 1, trail, false);
            }
        }
    }
}
