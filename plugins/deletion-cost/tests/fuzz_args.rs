//! The args parser on structured-random and mangled input: it returns a
//! configuration or an error naming the plugin, and never panics.

#[path = "../../sdk/tests/support/fuzz.rs"]
mod fuzz;

#[rustfmt::skip]
const KEYS: &[&str] = &[
    "traffic", "connections", "warmUp", "warmUpSeconds", "warmUpCost", "tiers", "tierLabel",
    "cap",
];

#[test]
fn args_parse_without_panicking() {
    fuzz::runner()
        .run(&fuzz::args_text(KEYS), |text| {
            if let Err(e) = deletion_cost::args::Config::parse(&text) {
                assert!(e.starts_with("deletion-cost args: "), "{e}");
            }
            Ok(())
        })
        .unwrap();
}
