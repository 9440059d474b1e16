// An int range on a bool field.
#[hpo::search_space]
struct S {
    #[param(int(0..=1))]
    flag: bool,
}

fn main() {}
