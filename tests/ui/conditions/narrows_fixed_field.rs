// Fixed fields are not searched, so nothing can narrow them.
#[hpo::search_space]
#[constraint(if heavy { epochs <= 10 })]
struct S {
    #[param(bool)]
    heavy: bool,
    #[param(fixed = 100)]
    epochs: u32,
}

fn main() {}
