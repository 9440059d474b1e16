// Two #[param] attributes on one field.
#[hpo::search_space]
struct S {
    #[param(int(1..=8))]
    #[param(int(1..=4))]
    x: u32,
}

fn main() {}
