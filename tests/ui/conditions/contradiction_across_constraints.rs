// Two constraints with the same condition narrowing one field to nothing.
#[hpo::search_space]
#[constraint(if heavy { batch_size in [8, 16] })]
#[constraint(if heavy { batch_size >= 32 })]
struct S {
    #[param(bool)]
    heavy: bool,
    #[param(choice(8, 16, 32, 64))]
    batch_size: usize,
}

fn main() {}
