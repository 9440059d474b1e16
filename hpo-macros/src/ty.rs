//! What the macro can tell about a field's type from its tokens.
//!
//! Only primitive names are recognised (`usize`, `f64`, `bool`, `String`,
//! `Option<T>`); anything else (an enum, an alias) is `Other`, and the
//! compiler's trait checks on the generated code take over for it, with
//! `const` assertions that a range's bounds fit the type.

use syn::{GenericArgument, PathArguments, Type};

/// The recognised shape of a (possibly `Option`-wrapped) field type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Prim {
    /// `f32` or `f64`.
    Float,
    /// A primitive integer with its inclusive range.
    Int { min: i128, max: i128 },
    /// `bool`.
    Bool,
    /// `String`.
    String,
    /// `&str` (with any lifetime).
    Str,
    /// Anything else (an enum deriving `Choice`, an alias, ...).
    Other,
}

impl Prim {
    pub fn of(ty: &Type) -> Prim {
        match ty {
            Type::Reference(r) => match Prim::of(&r.elem) {
                Prim::Other if is_named(&r.elem, "str") => Prim::Str,
                _ => Prim::Other,
            },
            Type::Paren(p) => Prim::of(&p.elem),
            Type::Group(g) => Prim::of(&g.elem),
            Type::Path(_) => {
                let Some(name) = last_ident(ty) else {
                    return Prim::Other;
                };
                match name.as_str() {
                    "f32" | "f64" => Prim::Float,
                    "bool" => Prim::Bool,
                    "String" => Prim::String,
                    "i8" => int::<i8>(),
                    "i16" => int::<i16>(),
                    "i32" => int::<i32>(),
                    "i64" => int::<i64>(),
                    "isize" => Prim::Int {
                        min: isize::MIN as i128,
                        max: isize::MAX as i128,
                    },
                    "u8" => int::<u8>(),
                    "u16" => int::<u16>(),
                    "u32" => int::<u32>(),
                    "u64" => int::<u64>(),
                    "usize" => Prim::Int {
                        min: 0,
                        max: usize::MAX as i128,
                    },
                    "i128" => Prim::Int {
                        min: i128::MIN,
                        max: i128::MAX,
                    },
                    "u128" => Prim::Int {
                        min: 0,
                        max: i128::MAX,
                    },
                    _ => Prim::Other,
                }
            }
            _ => Prim::Other,
        }
    }
}

/// The largest finite value of a float field type the macro can see (`f32`,
/// `f64`); `None` for anything else (an alias is checked by a generated
/// `const` assertion instead).
pub fn float_max(ty: &Type) -> Option<f64> {
    match ty {
        Type::Paren(p) => float_max(&p.elem),
        Type::Group(g) => float_max(&g.elem),
        _ => match last_ident(ty)?.as_str() {
            "f32" => Some(f64::from(f32::MAX)),
            "f64" => Some(f64::MAX),
            _ => None,
        },
    }
}

fn int<T: Into<i128> + Bounded>() -> Prim {
    Prim::Int {
        min: T::MIN_VALUE.into(),
        max: T::MAX_VALUE.into(),
    }
}

trait Bounded: Sized {
    const MIN_VALUE: Self;
    const MAX_VALUE: Self;
}
macro_rules! bounded {
    ($($t:ty),*) => {$(impl Bounded for $t { const MIN_VALUE: Self = <$t>::MIN; const MAX_VALUE: Self = <$t>::MAX; })*};
}
bounded!(i8, i16, i32, i64, u8, u16, u32, u64);

fn last_ident(ty: &Type) -> Option<String> {
    match ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

fn is_named(ty: &Type, name: &str) -> bool {
    last_ident(ty).is_some_and(|n| n == name)
}

/// The `T` of `Option<T>`, if `ty` is one.
pub fn option_inner(ty: &Type) -> Option<&Type> {
    let Type::Path(p) = ty else { return None };
    if p.qself.is_some() {
        return None;
    }
    let seg = p.path.segments.last()?;
    if seg.ident != "Option" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &seg.arguments else {
        return None;
    };
    match args.args.first() {
        Some(GenericArgument::Type(t)) if args.args.len() == 1 => Some(t),
        _ => None,
    }
}
