//! The one wasmtime Engine of the process, with the epoch ticker that
//! enforces call deadlines.

use std::sync::OnceLock;
use std::time::Duration;

use wasmtime::{Config, Engine};

/// How often the epoch advances; deadlines are rounded up to this.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// The shared engine. Compiled components are only valid for the engine
/// (and its settings) that compiled them, so there is exactly one.
pub fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let mut config = Config::new();
        config.wasm_component_model(true);
        // Deadlines: every store gets an epoch deadline before each call.
        config.epoch_interruption(true);
        let engine = Engine::new(&config).expect("wasmtime engine configuration is valid");
        let ticker = engine.weak();
        std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || loop {
                std::thread::sleep(EPOCH_TICK);
                match ticker.upgrade() {
                    Some(e) => e.increment_epoch(),
                    None => return,
                }
            })
            .expect("spawning the epoch ticker thread");
        engine
    })
}

/// Epoch ticks for a deadline, at least one.
pub fn ticks(deadline: Duration) -> u64 {
    (deadline.as_micros().div_ceil(EPOCH_TICK.as_micros())).max(1) as u64
}
