// The macro applied twice: one error at the second attribute, not
// "no #[param]" for every field.
#[hpo::search_space]
#[hpo::search_space]
struct S {
    #[param(int(1..=4))]
    x: u32,
}

fn main() {}
