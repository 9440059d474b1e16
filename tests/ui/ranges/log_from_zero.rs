// A log range must start above zero.
#[hpo::search_space]
struct S {
    #[param(float(0.0..=1.0, log))]
    lr: f64,
}

fn main() {}
