// An empty range.
#[hpo::search_space]
struct S {
    #[param(int(8..=8))]
    layers: u32,
}

fn main() {}
