//! Bindings for the contract's shared `types` and the `host` import. The
//! export glue is generated in each plugin crate by `export_plugin!`, for
//! the world that plugin exports: generating export bindings here would
//! make every plugin claim every extension point.
wit_bindgen::generate!({
    inline: "package wasmsched:sdk; world imports { import wasmsched:plugin/host@0.1.0; import wasmsched:plugin/types@0.1.0; }",
    path: "../../wit",
    world: "wasmsched:sdk/imports",
    generate_unused_types: true,
    generate_all,
});
