// Each choice once.
#[hpo::search_space]
struct S {
    #[param(choice(8, 16, 8))]
    batch_size: usize,
}

fn main() {}
