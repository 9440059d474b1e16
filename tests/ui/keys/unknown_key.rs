// An unknown kind is named and the accepted keys are listed.
#[hpo::search_space]
struct S {
    #[param(flaot(0.0..=1.0))]
    x: f64,
}

fn main() {}
