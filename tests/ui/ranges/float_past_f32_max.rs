// A bound past `f32::MAX`: the field would read infinity while the study
// stores a finite value.
#[hpo::search_space]
struct S {
    #[param(float(1.0..=1e39))]
    x: f32,
}

fn main() {}
