// Narrowings use <=, >=, == or in.
#[hpo::search_space]
#[constraint(if heavy { layers < 4 })]
struct S {
    #[param(bool)]
    heavy: bool,
    #[param(int(1..=8))]
    layers: u32,
}

fn main() {}
