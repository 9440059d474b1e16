// A constraint's condition must be decided before the field it narrows.
#[hpo::search_space]
#[constraint(if max_len > 256 { batch_size <= 16 })]
struct S {
    #[param(choice(8, 16, 32))]
    batch_size: usize,
    #[param(int(128..=512, step = 32))]
    max_len: usize,
}

fn main() {}
