// `in [..]` lists values that are not choices.
#[hpo::search_space]
#[constraint(if heavy { batch_size in [8, 10] })]
struct S {
    #[param(bool)]
    heavy: bool,
    #[param(choice(8, 16, 32))]
    batch_size: usize,
}

fn main() {}
