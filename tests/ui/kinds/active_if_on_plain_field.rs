// `active_if` needs an `Option` field.
#[hpo::search_space]
struct S {
    #[param(int(0..=3))]
    layers: u32,
    #[param(int(64..=1024), active_if = layers > 0)]
    hidden: u32,
}

fn main() {}
