// Generic structs are not supported.
#[hpo::search_space]
struct S<T> {
    #[param(fixed = Default::default())]
    x: T,
}

fn main() {}
