// `in [..]` narrows choices, not ranges.
#[hpo::search_space]
#[constraint(if heavy { layers in [1, 2] })]
struct S {
    #[param(bool)]
    heavy: bool,
    #[param(int(1..=8))]
    layers: u32,
}

fn main() {}
