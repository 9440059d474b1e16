// A string among integer choices.
#[hpo::search_space]
struct S {
    #[param(choice(8, "16", 32))]
    batch_size: usize,
}

fn main() {}
