// `default` on a type without `Default`: the error points at the field.
struct Schedule {
    warmup: u32,
}

#[hpo::search_space]
struct S {
    #[param(int(1..=4))]
    layers: u32,
    #[param(default)]
    schedule: Schedule,
}

fn main() {}
