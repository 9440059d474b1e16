//! Token streams rendered as the user would write them, for descriptions and
//! messages (`model.is_heavy()`, not `model . is_heavy ()`).

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

#[derive(Clone, Copy, PartialEq)]
enum Prev {
    /// Start of output, or just after an opening delimiter: no space.
    Open,
    /// An identifier, literal or closed group: an operand.
    Operand,
    /// A keyword (`in`, `if`, ...): a space follows even before a group.
    Keyword,
    /// A token after which no space goes (`.`, `::`, unary `-`, `!`, `&`).
    Tight,
    /// A binary operator or comma: a space follows.
    Spaced,
}

/// Keywords after which a group does not hug (`in [1, 2]`, `if (a)`).
const KEYWORDS: &[&str] = &[
    "in", "if", "else", "match", "return", "as", "move", "mut", "let", "while", "for", "loop",
    "where", "ref", "dyn", "impl",
];

/// Renders tokens with conventional Rust spacing.
pub fn pretty(tokens: &TokenStream) -> String {
    let mut out = String::new();
    write(tokens.clone(), &mut out);
    out
}

fn write(tokens: TokenStream, out: &mut String) {
    let mut prev = Prev::Open;
    let mut iter = tokens.into_iter().peekable();
    while let Some(tt) = iter.next() {
        match tt {
            TokenTree::Ident(i) => {
                space_if(
                    out,
                    matches!(prev, Prev::Operand | Prev::Keyword | Prev::Spaced),
                );
                let s = i.to_string();
                out.push_str(&s);
                prev = if KEYWORDS.contains(&s.as_str()) {
                    Prev::Keyword
                } else {
                    Prev::Operand
                };
            }
            TokenTree::Literal(l) => {
                space_if(
                    out,
                    matches!(prev, Prev::Operand | Prev::Keyword | Prev::Spaced),
                );
                out.push_str(&l.to_string());
                prev = Prev::Operand;
            }
            TokenTree::Group(g) => {
                let (open, close) = match g.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::Brace => ("{ ", " }"),
                    Delimiter::None => ("", ""),
                };
                // Calls, indexing and macro arguments hug what precedes them.
                let hug = prev == Prev::Operand && g.delimiter() != Delimiter::Brace
                    || prev == Prev::Tight;
                space_if(out, !hug && prev != Prev::Open);
                out.push_str(open);
                write(g.stream(), out);
                out.push_str(close);
                prev = Prev::Operand;
            }
            TokenTree::Punct(p) => {
                let mut op = String::from(p.as_char());
                let mut spacing = p.spacing();
                while spacing == Spacing::Joint {
                    match iter.peek() {
                        Some(TokenTree::Punct(q)) => {
                            op.push(q.as_char());
                            spacing = q.spacing();
                            iter.next();
                        }
                        _ => break,
                    }
                }
                match op.as_str() {
                    "." | "::" | ".." | "..=" => {
                        out.push_str(&op);
                        prev = Prev::Tight;
                    }
                    "," | ";" => {
                        out.push_str(&op);
                        prev = Prev::Spaced;
                    }
                    "?" => {
                        out.push_str(&op);
                        prev = Prev::Operand;
                    }
                    "!" if prev == Prev::Operand => {
                        // A macro call: `matches!(..)`.
                        out.push('!');
                        prev = Prev::Tight;
                    }
                    "-" | "!" | "&" | "*" if prev != Prev::Operand => {
                        space_if(out, matches!(prev, Prev::Spaced | Prev::Keyword));
                        out.push_str(&op);
                        prev = Prev::Tight;
                    }
                    _ => {
                        space_if(out, prev != Prev::Open);
                        out.push_str(&op);
                        prev = Prev::Spaced;
                    }
                }
            }
        }
    }
}

fn space_if(out: &mut String, cond: bool) {
    if cond && !out.is_empty() && !out.ends_with(' ') {
        out.push(' ');
    }
}

#[cfg(test)]
mod tests {
    use super::pretty;
    use quote::quote;

    #[test]
    fn renders_like_source() {
        assert_eq!(pretty(&quote!(model.is_heavy())), "model.is_heavy()");
        assert_eq!(
            pretty(&quote!(head_layers > 0 && !flag)),
            "head_layers > 0 && !flag"
        );
        assert_eq!(
            pretty(&quote!(if model.is_heavy() { batch_size <= 16, max_len <= 384 })),
            "if model.is_heavy() { batch_size <= 16, max_len <= 384 }"
        );
        assert_eq!(pretty(&quote!(x in [1, -2])), "x in [1, -2]");
        assert_eq!(
            pretty(&quote!(matches!(m, Backbone::BertLarge))),
            "matches!(m, Backbone::BertLarge)"
        );
        assert_eq!(pretty(&quote!(a - -1.5)), "a - -1.5");
    }
}
