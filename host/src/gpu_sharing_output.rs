//! Text renderings of the GPU-sharing report (`simulate`, `--explain`).

use std::collections::BTreeMap;

use comfy_table::{presets::UTF8_BORDERS_ONLY, Cell, ContentArrangement, Table};

use crate::escape::{name, Escaped};
use crate::gpu_sharing::{DeviceReport, GpuShare};

/// A pod's vGPUs, one per line: `GPU-x 3000 MiB 30%`.
pub fn shares(gpus: &[GpuShare]) -> String {
    gpus.iter()
        .map(|g| format!("{} {} MiB {}%", name(&g.uuid), g.memory_mib, g.cores))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Each device in use with what is left on it; untouched devices counted
/// per node.
pub fn devices(devices: &[DeviceReport]) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic);
    t.set_header(vec!["NODE", "GPU", "MEMORY FREE", "CORES FREE", "VGPUS"]);
    let mut untouched: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for d in devices {
        let e = untouched.entry(&d.node).or_default();
        e.1 += 1;
        if d.untouched() {
            e.0 += 1;
            continue;
        }
        t.add_row(vec![
            Cell::new(Escaped(&d.node).to_string()),
            Cell::new(format!("{} ({})", name(&d.uuid), d.index)),
            Cell::new(format!("{} / {} MiB", d.memory_free_mib, d.memory_mib)),
            Cell::new(format!("{} / {}%", d.cores_free, d.cores)),
            Cell::new(format!("{} / {}", d.vgpus, d.vgpus_max)),
        ]);
    }
    let whole: usize = untouched.values().map(|(w, _)| w).sum();
    let whole_nodes = untouched.values().filter(|(w, n)| w == n).count();
    let mut out = format!(
        "GPUs (HAMi): {} of {} untouched, {} of {} nodes untouched; in use:\n",
        whole,
        devices.len(),
        whole_nodes,
        untouched.len()
    );
    out.push_str(&t.to_string());
    out.push('\n');
    out
}
