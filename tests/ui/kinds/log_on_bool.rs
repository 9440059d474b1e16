// A bool takes no options.
#[hpo::search_space]
struct S {
    #[param(bool(log))]
    flag: bool,
}

fn main() {}
