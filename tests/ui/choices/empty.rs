// At least one choice.
#[hpo::search_space]
struct S {
    #[param(choice())]
    batch_size: usize,
}

fn main() {}
