// A float range on an integer field.
#[hpo::search_space]
struct S {
    #[param(float(0.0..=1.0))]
    batch_size: usize,
}

fn main() {}
