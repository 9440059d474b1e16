// A log range has no even grid.
#[hpo::search_space]
struct S {
    #[param(float(0.001..=1.0, log, step = 0.001))]
    lr: f64,
}

fn main() {}
