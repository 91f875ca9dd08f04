//! The gradient formula language of `backward = { x = "grad * y" }`: its grammar, its functions,
//! and a parser that keeps the byte span (within the formula text) of every node.
//!
//! ```text
//! formula := sum
//! sum     := product (("+" | "-") product)*
//! product := unary (("*" | "/") unary)*
//! unary   := "-" unary | atom
//! atom    := number | path | name "(" formula ("," formula)* ")" | "(" formula ")"
//! path    := name ("." name)*
//! ```
//!
//! Names are `grad` (the incoming gradient of the output), `output` (the op's float output) and
//! the op's inputs, and paths name fields of declared struct inputs (`p.scale`); what a name and a function may be is checked by validation
//! ([`crate::validate`]), which also gives each node its kind (tensor or number).

use std::ops::Range;

/// A parsed formula node.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Its bytes within the formula text.
    pub span: Range<usize>,
}

/// The kinds of formula nodes.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A number literal.
    Number(f64),
    /// A name: `grad`, `output` or an input.
    Name(String),
    /// `-x`.
    Neg(Box<Expr>),
    /// `a + b`, `a - b`, `a * b`, `a / b`.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `f(a, b)`.
    Call {
        /// The function's name.
        name: String,
        /// Where the name is written.
        name_span: Range<usize>,
        /// The arguments.
        args: Vec<Expr>,
    },
}

/// A binary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/`.
    Div,
}

impl BinOp {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            Self::Add => "+",
            Self::Sub => "-",
            Self::Mul => "*",
            Self::Div => "/",
        }
    }
}

/// The formula names that are not inputs.
pub const GRAD: &str = "grad";
/// The op's float output.
pub const OUTPUT: &str = "output";
/// The whole formula of a float input that gets no gradient.
pub const NONE: &str = "none";

/// The internal function a tensor times `relu_mask(m)` becomes, `relu_gate(m, tensor)`: not
/// a name a formula can write (it is not in [`FUNCTIONS`]).
pub const RELU_GATE: &str = "relu_gate";

/// What a function's parameter accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// A tensor.
    Tensor,
    /// A number.
    Number,
    /// A tensor or a number.
    Either,
    /// An integer literal (a dimension; negative counts from the end).
    Dim,
}

/// One function of the formula language.
#[derive(Clone, Copy, Debug)]
pub struct Function {
    /// Its name.
    pub name: &'static str,
    /// Its parameters.
    pub params: &'static [Param],
    /// What it computes, for the JSON Schema (which the manifest reference's formula list is
    /// checked against); read only with the `schema` feature.
    #[cfg_attr(not(feature = "schema"), allow(dead_code))]
    pub doc: &'static str,
}

impl Function {
    /// Whether its value is a number whatever its arguments are (`dim_size`); the others are
    /// tensors when any argument is one.
    pub fn returns_number(&self) -> bool {
        self.name == "dim_size"
    }
}

const T: Param = Param::Tensor;
const N: Param = Param::Number;
const E: Param = Param::Either;

/// Every function, in the manifest reference's order.
pub const FUNCTIONS: &[Function] = &[
    Function {
        name: "exp",
        params: &[E],
        doc: "e^x",
    },
    Function {
        name: "log",
        params: &[E],
        doc: "natural logarithm",
    },
    Function {
        name: "sqrt",
        params: &[E],
        doc: "square root",
    },
    Function {
        name: "tanh",
        params: &[E],
        doc: "hyperbolic tangent",
    },
    Function {
        name: "sigmoid",
        params: &[E],
        doc: "1 / (1 + e^-x)",
    },
    Function {
        name: "abs",
        params: &[E],
        doc: "absolute value",
    },
    Function {
        name: "sin",
        params: &[E],
        doc: "sine",
    },
    Function {
        name: "cos",
        params: &[E],
        doc: "cosine",
    },
    Function {
        name: "recip",
        params: &[E],
        doc: "1 / x",
    },
    Function {
        name: "sign",
        params: &[T],
        doc: "-1, 0 or 1 per element",
    },
    Function {
        name: "erf",
        params: &[T],
        doc: "the error function",
    },
    Function {
        name: "powf",
        params: &[E, E],
        doc: "x to the power y",
    },
    Function {
        name: "relu_mask",
        params: &[T],
        doc: "0 where x <= 0, else 1 (NaN included, as Burn's relu backward)",
    },
    Function {
        name: "gt",
        params: &[E, E],
        doc: "1 where x > y, else 0",
    },
    Function {
        name: "ge",
        params: &[E, E],
        doc: "1 where x >= y, else 0",
    },
    Function {
        name: "lt",
        params: &[E, E],
        doc: "1 where x < y, else 0",
    },
    Function {
        name: "le",
        params: &[E, E],
        doc: "1 where x <= y, else 0",
    },
    Function {
        name: "where",
        params: &[T, E, E],
        doc: "a where cond is not 0, else b",
    },
    Function {
        name: "clamp",
        params: &[T, N, N],
        doc: "x clamped to [lo, hi]",
    },
    Function {
        name: "sum_dim",
        params: &[T, Param::Dim],
        doc: "sum over a dimension, kept with size 1",
    },
    Function {
        name: "mean_dim",
        params: &[T, Param::Dim],
        doc: "mean over a dimension, kept with size 1",
    },
    Function {
        name: "dim_size",
        params: &[T, Param::Dim],
        doc: "the size of dimension `dim` of x, as a number",
    },
];

/// The function named `name`.
pub fn function(name: &str) -> Option<&'static Function> {
    FUNCTIONS.iter().find(|f| f.name == name)
}

/// A parse error: where, what, and how to fix it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Bytes of the formula text at fault.
    pub span: Range<usize>,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub help: String,
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Number(f64),
    Name(String),
    Op(char),
}

/// Parses a formula.
///
/// # Errors
///
/// The first syntax error, with its span in `text`.
pub fn parse(text: &str) -> Result<Expr, ParseError> {
    let tokens = lex(text)?;
    let mut p = Parser {
        tokens,
        at: 0,
        end: text.len(),
        depth: 0,
    };
    if p.tokens.is_empty() {
        return Err(ParseError {
            span: 0..text.len(),
            message: "empty formula".to_owned(),
            help: format!("write the input's gradient, e.g. \"grad * y\", or \"{NONE}\""),
        });
    }
    let expr = p.sum()?;
    if let Some((_, span)) = p.tokens.get(p.at) {
        return Err(ParseError {
            span: span.clone(),
            message: "unexpected text after the formula".to_owned(),
            help: "join the parts with an operator (`+ - * /`) or remove the extra text".to_owned(),
        });
    }
    Ok(expr)
}

fn lex(text: &str) -> Result<Vec<(Token, Range<usize>)>, ParseError> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit()
            || (c == '.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
                i += 1;
            }
            if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
                let mut j = i + 1;
                if j < bytes.len() && (bytes[j] == b'+' || bytes[j] == b'-') {
                    j += 1;
                }
                if j < bytes.len() && bytes[j].is_ascii_digit() {
                    i = j;
                    while i < bytes.len() && bytes[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let literal = &text[start..i];
            match literal.parse::<f64>() {
                Ok(v) if v.is_finite() => out.push((Token::Number(v), start..i)),
                _ => {
                    return Err(ParseError {
                        span: start..i,
                        message: format!("`{literal}` is not a number"),
                        help: "write a finite decimal number such as `0.5` or `1e-3`".to_owned(),
                    });
                }
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            // A name, or a dotted path into a declared struct (`p.scale`).
            let start = i;
            loop {
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                if bytes.get(i) != Some(&b'.') {
                    break;
                }
                let field = bytes.get(i + 1).copied();
                if !field.is_some_and(|b| b.is_ascii_alphabetic() || b == b'_') {
                    return Err(ParseError {
                        span: start..i + 1,
                        message: format!("`{}` ends in `.` without a field name", &text[start..i]),
                        help: "write a field after the dot, as in `p.scale`".to_owned(),
                    });
                }
                i += 1;
            }
            out.push((Token::Name(text[start..i].to_owned()), start..i));
        } else if "+-*/(),".contains(c) {
            out.push((Token::Op(c), i..i + 1));
            i += 1;
        } else {
            let len = text[i..].chars().next().map_or(1, char::len_utf8);
            let shown = &text[i..i + len];
            let help = match shown {
                "^" => "write a power as `powf(x, 2)`".to_owned(),
                "[" | "]" | "{" | "}" => "group with `(` and `)`".to_owned(),
                _ => "formulas use names, numbers, `+ - * /`, parentheses and function calls such as `exp(x)`".to_owned(),
            };
            return Err(ParseError {
                span: i..i + len,
                message: format!("unexpected character `{shown}`"),
                help,
            });
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<(Token, Range<usize>)>,
    at: usize,
    end: usize,
    /// How deep the descent is (parentheses, calls, unary minus).
    depth: usize,
}

/// The deepest nesting a formula may have: the parser, the typing and the emitter recurse once
/// per level, and a build script's stack is not large.
pub const MAX_DEPTH: usize = 64;

impl Parser {
    fn peek_op(&self) -> Option<char> {
        match self.tokens.get(self.at) {
            Some((Token::Op(c), _)) => Some(*c),
            _ => None,
        }
    }

    fn sum(&mut self) -> Result<Expr, ParseError> {
        let mut lhs = self.product()?;
        while let Some(c @ ('+' | '-')) = self.peek_op() {
            self.at += 1;
            let rhs = self.product()?;
            let op = if c == '+' { BinOp::Add } else { BinOp::Sub };
            lhs = binary(op, lhs, rhs);
        }
        Ok(lhs)
    }

    fn product(&mut self) -> Result<Expr, ParseError> {
        let mut lhs = self.unary()?;
        while let Some(c @ ('*' | '/')) = self.peek_op() {
            self.at += 1;
            let rhs = self.unary()?;
            let op = if c == '*' { BinOp::Mul } else { BinOp::Div };
            lhs = binary(op, lhs, rhs);
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        self.depth += 1;
        let result = self.unary_inner();
        self.depth -= 1;
        result
    }

    fn unary_inner(&mut self) -> Result<Expr, ParseError> {
        if self.depth > MAX_DEPTH {
            let span = self
                .tokens
                .get(self.at)
                .map_or(self.end..self.end, |(_, span)| span.clone());
            return Err(ParseError {
                span,
                message: format!("the formula nests deeper than {MAX_DEPTH} levels"),
                help: "split it: name a part with the function form, or simplify the expression"
                    .to_owned(),
            });
        }
        if self.peek_op() == Some('-') {
            let start = self.tokens[self.at].1.start;
            self.at += 1;
            let inner = self.unary()?;
            let span = start..inner.span.end;
            return Ok(Expr {
                kind: ExprKind::Neg(Box::new(inner)),
                span,
            });
        }
        self.atom()
    }

    fn missing(&self, what: &str) -> ParseError {
        let span = match self.tokens.get(self.at) {
            Some((_, span)) => span.clone(),
            None => self.end..self.end,
        };
        let found = match self.tokens.get(self.at) {
            Some((Token::Op(c), _)) => format!("`{c}`"),
            Some((Token::Name(n), _)) => format!("`{n}`"),
            Some((Token::Number(_), _)) => "a number".to_owned(),
            None => "the end of the formula".to_owned(),
        };
        ParseError {
            span,
            message: format!("expected {what}, found {found}"),
            help: "complete the formula: every operator needs an operand on each side, every `(` a `)`"
                .to_owned(),
        }
    }

    fn atom(&mut self) -> Result<Expr, ParseError> {
        let Some((token, span)) = self.tokens.get(self.at).cloned() else {
            return Err(self.missing("a name, a number or `(`"));
        };
        match token {
            Token::Number(v) => {
                self.at += 1;
                Ok(Expr {
                    kind: ExprKind::Number(v),
                    span,
                })
            }
            Token::Name(name) => {
                self.at += 1;
                if self.peek_op() != Some('(') {
                    return Ok(Expr {
                        kind: ExprKind::Name(name),
                        span,
                    });
                }
                self.at += 1;
                let mut args = Vec::new();
                if self.peek_op() == Some(')') {
                    self.at += 1;
                } else {
                    loop {
                        args.push(self.sum()?);
                        match self.peek_op() {
                            Some(',') => self.at += 1,
                            Some(')') => {
                                self.at += 1;
                                break;
                            }
                            _ => return Err(self.missing("`,` or `)`")),
                        }
                    }
                }
                let end = self.tokens[self.at - 1].1.end;
                Ok(Expr {
                    kind: ExprKind::Call {
                        name,
                        name_span: span.clone(),
                        args,
                    },
                    span: span.start..end,
                })
            }
            Token::Op('(') => {
                self.at += 1;
                let inner = self.sum()?;
                if self.peek_op() != Some(')') {
                    return Err(self.missing("`)`"));
                }
                let end = self.tokens[self.at].1.end;
                self.at += 1;
                Ok(Expr {
                    kind: inner.kind,
                    span: span.start..end,
                })
            }
            Token::Op(_) => Err(self.missing("a name, a number or `(`")),
        }
    }
}

fn binary(op: BinOp, lhs: Expr, rhs: Expr) -> Expr {
    let span = lhs.span.start..rhs.span.end;
    Expr {
        kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
        span,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(e: &Expr) -> String {
        match &e.kind {
            ExprKind::Number(v) => format!("{v}"),
            ExprKind::Name(n) => n.clone(),
            ExprKind::Neg(i) => format!("(-{})", show(i)),
            ExprKind::Binary(op, a, b) => format!("({} {} {})", show(a), op.symbol(), show(b)),
            ExprKind::Call { name, args, .. } => format!(
                "{name}({})",
                args.iter().map(show).collect::<Vec<_>>().join(", ")
            ),
        }
    }

    #[test]
    fn precedence_and_associativity() {
        let e = parse("grad * y + x / 2 - -z").unwrap();
        assert_eq!(show(&e), "(((grad * y) + (x / 2)) - (-z))");
        let e = parse("a - b - c").unwrap();
        assert_eq!(show(&e), "((a - b) - c)");
        let e = parse("-(a + b) * sum_dim(grad * output, -1)").unwrap();
        assert_eq!(show(&e), "((-(a + b)) * sum_dim((grad * output), (-1)))");
        assert_eq!(e.span, 0..37);
    }

    #[test]
    fn spans_point_into_the_text() {
        let text = "grad * exp(x)";
        let ExprKind::Binary(_, _, rhs) = parse(text).unwrap().kind else {
            panic!()
        };
        assert_eq!(&text[rhs.span.clone()], "exp(x)");
        let ExprKind::Call { name_span, .. } = rhs.kind else {
            panic!()
        };
        assert_eq!(&text[name_span], "exp");
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = format!("{}grad{}", "(".repeat(5000), ")".repeat(5000));
        let err = parse(&deep).unwrap_err();
        assert_eq!(err.message, "the formula nests deeper than 64 levels");
        assert!(parse(&format!("{}grad", "-".repeat(5000))).is_err());
        let ok = format!("{}grad{}", "exp(".repeat(30), ")".repeat(30));
        assert!(parse(&ok).is_ok());
    }

    #[test]
    fn numbers() {
        assert_eq!(show(&parse("1e-3 * .5").unwrap()), "(0.001 * 0.5)");
        assert_eq!(
            parse("1e999").unwrap_err().message,
            "`1e999` is not a number"
        );
    }

    #[test]
    fn errors_have_positions() {
        let err = parse("grad * ").unwrap_err();
        assert_eq!(err.span, 7..7);
        assert_eq!(
            err.message,
            "expected a name, a number or `(`, found the end of the formula"
        );
        let err = parse("grad ^ 2").unwrap_err();
        assert_eq!(
            (err.span, err.message.as_str()),
            (5..6, "unexpected character `^`")
        );
        assert_eq!(err.help, "write a power as `powf(x, 2)`");
        let err = parse("exp(x").unwrap_err();
        assert_eq!(
            err.message,
            "expected `,` or `)`, found the end of the formula"
        );
        let err = parse("grad y").unwrap_err();
        assert_eq!(
            (err.span, err.message.as_str()),
            (5..6, "unexpected text after the formula")
        );
        let err = parse("  ").unwrap_err();
        assert_eq!(err.message, "empty formula");
        let err = parse("(grad * x").unwrap_err();
        assert_eq!(err.message, "expected `)`, found the end of the formula");
    }
}
