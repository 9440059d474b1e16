// A bare #[param] is only enough for a bool.
#[hpo::search_space]
struct S {
    #[param]
    layers: u32,
}

fn main() {}
