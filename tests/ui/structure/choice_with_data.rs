// `Choice` variants are unit variants.
#[derive(hpo::Choice)]
enum Backbone {
    Base,
    Custom(String),
}

fn main() {}
