// A bare `choice` on an enum that does not derive `hpo::Choice`.
#[derive(Debug, Clone, Copy)]
enum Backbone { Base, Large }

#[hpo::search_space]
struct S {
    #[param(choice)]
    model: Backbone,
}

fn main() {}
