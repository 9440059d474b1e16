// A bound past `f32::MAX` for an `f32` reached through an alias.
type Lr = f32;

#[hpo::search_space]
struct S {
    #[param(float(1e-6..=1e39, log))]
    lr: Lr,
}

fn main() {}
