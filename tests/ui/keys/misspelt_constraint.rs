// A misspelt `#[constraint]` is named, not left to rustc's "cannot find attribute".
#[hpo::search_space]
#[constraints(if heavy { width <= 64 })]
struct S {
    #[param(bool)]
    heavy: bool,
    #[param(int(8..=512))]
    width: u32,
}

fn main() {}
