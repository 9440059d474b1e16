// An `Option` parameter must say when it is sampled.
#[hpo::search_space]
struct S {
    #[param(int(64..=1024))]
    hidden: Option<u32>,
}

fn main() {}
