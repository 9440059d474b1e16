// The macro itself accepts only `crate = "path"`.
#[hpo::search_space(krate = "hpo")]
struct S {
    #[param(int(1..=8))]
    x: u32,
}

fn main() {}
