// A field's #[param] split in two: the duplicate is the one error, not "`hidden`
// is an `Option`: say when it is sampled" about the first half.
#[hpo::search_space]
struct S {
    #[param(int(0..=3))]
    layers: u32,
    #[param(int(64..=1024))]
    #[param(active_if = layers > 0)]
    hidden: Option<u32>,
}

fn main() {}
