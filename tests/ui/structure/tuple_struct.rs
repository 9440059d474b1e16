// Parameters are named by their fields.
#[hpo::search_space]
struct S(#[param(int(1..=8))] u32);

fn main() {}
