// `log` belongs inside the range's parentheses.
#[hpo::search_space]
struct S {
    #[param(int(1..=64), log)]
    x: u32,
}

fn main() {}
