// A bare `choice` is for enums; integers list their choices.
#[hpo::search_space]
struct S {
    #[param(choice)]
    batch_size: usize,
}

fn main() {}
