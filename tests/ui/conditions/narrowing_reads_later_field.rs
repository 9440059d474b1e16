// A narrowing's value may read only fields sampled before the field it narrows.
#[hpo::search_space]
#[constraint(if heavy { width <= max_width })]
struct S {
    #[param(bool)]
    heavy: bool,
    #[param(int(8..=512))]
    width: u32,
    #[param(choice(64, 128))]
    max_width: u32,
}

fn main() {}
