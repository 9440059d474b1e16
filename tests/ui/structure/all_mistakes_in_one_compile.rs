// Every mistake is reported in one compile, and nothing else.
#[hpo::search_space]
#[constraint(if heavy { batch_size <= 4 })]
struct S {
    #[param(bool)]
    heavy: bool,
    #[param(float(0.0..=1.0))]
    batch_size: usize,
    #[param(int(1..=8, lgo))]
    layers: u32,
    epochs: u32,
}

fn uses_the_struct(s: &S) -> usize {
    // The fallback keeps the struct and its impl, so this is not an error.
    let _ = <S as hpo::SearchSpace>::to_params(s);
    s.batch_size
}

fn main() {}
