//! Canonical source text of the Rust fragments a manifest contains (plain types, composite
//! paths, cfg predicates), so the IR carries them ready to print and the emitters never touch
//! tokens.

use proc_macro2::{Delimiter, TokenStream, TokenTree};

/// `Vec<usize>`, `Option<(f32, f32)>`, `crate::composite::softplus`: prettyplease's spelling of a
/// type, on one line.
pub fn type_text(ty: &syn::Type) -> String {
    let item = syn::Item::Type(syn::ItemType {
        attrs: Vec::new(),
        vis: syn::Visibility::Inherited,
        type_token: Default::default(),
        ident: syn::Ident::new("T", proc_macro2::Span::call_site()),
        generics: syn::Generics::default(),
        eq_token: Default::default(),
        ty: Box::new(ty.clone()),
        semi_token: Default::default(),
    });
    let printed = prettyplease::unparse(&syn::File {
        shebang: None,
        attrs: Vec::new(),
        items: vec![item],
    });
    let body = printed
        .trim()
        .strip_prefix("type T =")
        .and_then(|s| s.strip_suffix(';'))
        .unwrap_or(&printed);
    one_line(body)
}

/// A path, spelled like [`type_text`] spells it.
pub fn path_text(path: &syn::Path) -> String {
    type_text(&syn::Type::Path(syn::TypePath {
        qself: None,
        path: path.clone(),
    }))
}

/// `feature = "cube"`, `all(unix, not(feature = "x"))`: a cfg predicate with rustfmt's spacing.
pub fn cfg_text(meta: &syn::Meta) -> String {
    let mut out = String::new();
    let tokens: TokenStream = quote::ToTokens::to_token_stream(meta);
    write_cfg_tokens(tokens, &mut out);
    out
}

fn write_cfg_tokens(tokens: TokenStream, out: &mut String) {
    for tree in tokens {
        match tree {
            TokenTree::Ident(id) => out.push_str(&id.to_string()),
            TokenTree::Literal(lit) => out.push_str(&lit.to_string()),
            TokenTree::Punct(p) => match p.as_char() {
                '=' => out.push_str(" = "),
                ',' => out.push_str(", "),
                other => out.push(other),
            },
            TokenTree::Group(g) => {
                let (open, close) = match g.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::Brace => ("{", "}"),
                    Delimiter::None => ("", ""),
                };
                out.push_str(open);
                write_cfg_tokens(g.stream(), out);
                // `all(a, b,)` prints as `all(a, b)`.
                if out.ends_with(", ") {
                    out.truncate(out.len() - 2);
                }
                out.push_str(close);
            }
        }
    }
}

/// Joins the lines of a (rarely) wrapped type back into one line.
fn one_line(text: &str) -> String {
    let text = text.trim();
    if !text.contains('\n') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    for piece in text.split_whitespace() {
        let glue = !(out.is_empty()
            || out.ends_with(['(', '<', '['])
            || piece.starts_with([')', '>', ']', ',']));
        if glue {
            out.push(' ');
        }
        out.push_str(piece);
    }
    // A trailing comma left by a wrapped list: `(f32, f32,)` → `(f32, f32)`, `Vec<u8,>` →
    // `Vec<u8>`; but a one-element tuple keeps its comma: `(u8,)`.
    strip_wrapping_commas(&out)
}

/// Removes the commas before `)`, `>` and `]` that wrapping added, keeping the one that makes
/// a parenthesized single element a tuple.
fn strip_wrapping_commas(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    // For each open bracket: whether a comma appeared at its top level before the current one
    // (set from the start for the argument list of `Fn(..)` or `fn(..)`, which is no tuple).
    let mut commas: Vec<bool> = Vec::new();
    for (i, &c) in chars.iter().enumerate() {
        match c {
            '(' => {
                let after_name = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
                commas.push(after_name);
            }
            '<' | '[' => commas.push(false),
            // (The `>` of `->` closes nothing.)
            '>' if i > 0 && chars[i - 1] == '-' => {}
            ')' | '>' | ']' => {
                commas.pop();
            }
            ',' => {
                let next = chars.get(i + 1).copied();
                let closes = matches!(next, Some(')' | '>' | ']'));
                let earlier_comma = commas.last().copied().unwrap_or(false);
                if let Some(top) = commas.last_mut() {
                    *top = true;
                }
                // `(x,)` with no earlier comma is a one-element tuple: keep it.
                if closes && (next != Some(')') || earlier_comma) {
                    continue;
                }
            }
            _ => {}
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_and_paths_print_canonically() {
        let ty: syn::Type = syn::parse_str("Option < ( f32 , f32 ) >").unwrap();
        assert_eq!(type_text(&ty), "Option<(f32, f32)>");
        let ty: syn::Type = syn::parse_str("& 'static [ usize ]").unwrap();
        assert_eq!(type_text(&ty), "&'static [usize]");
        let path: syn::Path = syn::parse_str(":: burn_route :: rt").unwrap();
        assert_eq!(path_text(&path), "::burn_route::rt");
        // A single-element tuple keeps its comma, also when the type is long enough to wrap.
        let ty: syn::Type = syn::parse_str("(u8,)").unwrap();
        assert_eq!(type_text(&ty), "(u8,)");
        let long = "std::collections::BTreeMap<(u8,), std::collections::BTreeMap<std::string::String, std::vec::Vec<std::option::Option<(u8,)>>>>";
        let ty: syn::Type = syn::parse_str(long).unwrap();
        assert_eq!(type_text(&ty), long);
        assert_eq!(strip_wrapping_commas("(a, b,)"), "(a, b)");
        assert_eq!(strip_wrapping_commas("Vec<(u8,),>"), "Vec<(u8,)>");
        assert_eq!(
            strip_wrapping_commas("Box<dyn Fn(u8,) -> u8>"),
            "Box<dyn Fn(u8) -> u8>"
        );
        assert_eq!(
            strip_wrapping_commas("Box<dyn Fn(Vec<(u8,)>, fn() -> u8,) -> u8,>"),
            "Box<dyn Fn(Vec<(u8,)>, fn() -> u8) -> u8>"
        );
    }

    #[test]
    fn cfg_predicates_print_canonically() {
        let meta: syn::Meta = syn::parse_str("all( feature=\"a\" ,not(unix), )").unwrap();
        assert_eq!(cfg_text(&meta), "all(feature = \"a\", not(unix))");
    }
}
