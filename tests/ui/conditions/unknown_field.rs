// A misspelt field in a condition.
#[hpo::search_space]
#[constraint(if modle_is_heavy { batch_size <= 16 })]
struct S {
    #[param(bool)]
    model_is_heavy: bool,
    #[param(choice(8, 16, 32))]
    batch_size: usize,
}

fn main() {}
