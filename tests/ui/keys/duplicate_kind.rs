// A field has one kind; the second is reported where it is written.
#[hpo::search_space]
struct S {
    #[param(int(1..=8), int(1..=4))]
    x: u32,
}

fn main() {}
