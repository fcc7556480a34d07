//! The args parser on structured-random and mangled input: it returns a
//! configuration or an error naming the plugin, and never panics.

#[path = "../../sdk/tests/support/fuzz.rs"]
mod fuzz;

#[rustfmt::skip]
const KEYS: &[&str] = &[
    "policy", "fitWeight", "utilizationWeight", "unknownUtilization", "utilizationAnnotation",
    "utilizationMetric", "modelAliases", "modelMatching", "topologyPenalty", "fractional",
    "cpuPodsAvoidGpuNodes",
];

#[test]
fn args_parse_without_panicking() {
    fuzz::runner()
        .run(&fuzz::args_text(KEYS), |text| {
            if let Err(e) = gpu_topology::Config::parse(&text) {
                assert!(e.starts_with("gpu-topology args: "), "{e}");
            }
            Ok(())
        })
        .unwrap();
}
