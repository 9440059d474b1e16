// Choices are literals; enums use a bare `choice`.
const BIG: usize = 64;

#[hpo::search_space]
struct S {
    #[param(choice(8, 16, BIG))]
    batch_size: usize,
}

fn main() {}
