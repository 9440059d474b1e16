// A misspelt key inside #[param] is the one error: the `Option` field does not
// also get "say when it is sampled with `active_if`".
#[hpo::search_space]
struct S {
    #[param(int(0..=3))]
    layers: u32,
    #[param(int(64..=1024), actve_if = layers > 0)]
    hidden: Option<u32>,
}

fn main() {}
