// `log` given twice.
#[hpo::search_space]
struct S {
    #[param(float(1e-3..=1.0, log, log))]
    x: f64,
}

fn main() {}
