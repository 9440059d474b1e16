// The macro cannot see through the alias; a `const` assertion can, and it
// points at the bound that does not fit.
type Small = u8;

#[hpo::search_space]
struct S {
    #[param(int(0..=300))]
    x: Small,
}

fn main() {}
