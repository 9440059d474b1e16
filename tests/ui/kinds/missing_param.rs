// Every field needs a #[param].
#[hpo::search_space]
struct S {
    #[param(int(1..=8))]
    layers: u32,
    epochs: u32,
}

fn main() {}
