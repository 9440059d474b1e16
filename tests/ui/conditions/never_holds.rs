// A narrowing outside the declared range can never be satisfied.
#[hpo::search_space]
#[constraint(if heavy { max_len <= 64 })]
struct S {
    #[param(bool)]
    heavy: bool,
    #[param(int(128..=512, step = 32))]
    max_len: usize,
}

fn main() {}
