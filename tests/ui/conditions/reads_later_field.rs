// A condition may only read fields sampled before it.
#[hpo::search_space]
struct S {
    #[param(int(64..=1024), active_if = layers > 0)]
    hidden: Option<u32>,
    #[param(int(0..=3))]
    layers: u32,
}

fn main() {}
