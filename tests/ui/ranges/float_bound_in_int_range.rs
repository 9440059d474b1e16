// Int ranges take integer bounds.
#[hpo::search_space]
struct S {
    #[param(int(1..=8.5))]
    layers: u32,
}

fn main() {}
