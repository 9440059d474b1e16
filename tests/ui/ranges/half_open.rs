// Ranges are inclusive.
#[hpo::search_space]
struct S {
    #[param(int(1..8))]
    layers: u32,
}

fn main() {}
