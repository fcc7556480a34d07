//! The args parser on structured-random and mangled input: it returns a
//! cost model or an error naming the plugin, and never panics.

#[path = "../../sdk/tests/support/fuzz.rs"]
mod fuzz;

#[rustfmt::skip]
const KEYS: &[&str] = &[
    "costs", "zoneCosts", "sameNode", "sameZone", "sameRegion", "crossRegion", "unknown",
    "zone-a", "zone-b",
];

#[test]
fn args_parse_without_panicking() {
    fuzz::runner()
        .run(&fuzz::args_text(KEYS), |text| {
            if let Err(e) = network_locality::parse_args(&text) {
                assert!(e.starts_with("network-locality args: "), "{e}");
            }
            Ok(())
        })
        .unwrap();
}
