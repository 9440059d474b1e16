// A misspelt `#[param]` is the one and only error, not "no #[param]".
#[hpo::search_space]
struct S {
    #[parm(int(1..=4))]
    x: u32,
}

fn main() {}
