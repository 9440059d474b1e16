// Bounds must fit the field's type.
#[hpo::search_space]
struct S {
    #[param(int(0..=300))]
    width: u8,
}

fn main() {}
