// A misspelt option inside a range.
#[hpo::search_space]
struct S {
    #[param(float(1e-3..=1.0, lgo))]
    x: f64,
}

fn main() {}
