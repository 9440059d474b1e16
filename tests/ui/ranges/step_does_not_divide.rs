// The step must divide the range.
#[hpo::search_space]
struct S {
    #[param(int(128..=500, step = 32))]
    max_len: usize,
}

fn main() {}
