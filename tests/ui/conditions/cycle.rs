// Two fields whose conditions read each other: no declaration order works,
// so the error names the cycle instead of suggesting one.
#[hpo::search_space]
struct S {
    #[param(int(1..=4), active_if = b.is_some())]
    a: Option<u32>,
    #[param(int(1..=4), active_if = a.is_none())]
    b: Option<u32>,
}

fn main() {}
