// Two narrowings of one field in one constraint that no value satisfies
// together: every trial with `heavy` would be infeasible.
#[hpo::search_space]
#[constraint(if heavy { width <= 64, width >= 128 })]
struct S {
    #[param(bool)]
    heavy: bool,
    #[param(int(8..=512))]
    width: u32,
}

fn main() {}
