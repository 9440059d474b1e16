// `fixed` needs a value.
#[hpo::search_space]
struct S {
    #[param(fixed)]
    epochs: u32,
}

fn main() {}
