//! Extended resources backed by DRA (DRAExtendedResource) and device
//! binding conditions (DRADeviceBindingConditions) through `simulate`: a
//! pod asking `example.com/fpga` is served by the devices of the class
//! naming it (or by its implicit `deviceclass.resource.kubernetes.io/`
//! name) on nodes that do not advertise it, gets a claim owned by it with
//! one request per container, and a node's device plugin wins where the
//! node advertises the resource.

use serde_json::Value;
use wasmsched::{config, manifest, simulate};

fn run(input: &str) -> simulate::Report {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.yaml");
    std::fs::write(&file, input).unwrap();
    let scheduler = config::build(&config::ConfigFile::default(), dir.path(), 1).unwrap();
    let manifests = manifest::load(&[file]).unwrap();
    let opts = simulate::Options {
        all_pods: true,
        ..Default::default()
    };
    simulate::run(&scheduler, manifests, &opts).unwrap()
}

fn node(name: &str, extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{kubernetes.io/hostname: {name}}}\n\
         status:\n  allocatable: {{cpu: '8', memory: 16Gi, pods: '110'{extra}}}\n---\n"
    )
}

/// Class `fpga` (`extendedResourceName: example.com/fpga`) and a slice of
/// `count` FPGAs on `node`; `conditions`: each device's binding
/// conditions.
fn dra(node: &str, count: usize, conditions: &str) -> String {
    let devices: String = (0..count)
        .map(|i| format!("  - name: fpga-{i}\n{conditions}"))
        .collect();
    format!(
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: fpga\n\
         spec:\n  extendedResourceName: example.com/fpga\n  selectors:\n  - cel:\n      expression: device.driver == \"fpga.example.com\"\n---\n\
         apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata:\n  name: {node}-fpga\n\
         spec:\n  driver: fpga.example.com\n  nodeName: {node}\n  pool:\n    name: {node}\n    generation: 1\n    resourceSliceCount: 1\n  devices:\n{devices}---\n"
    )
}

fn pod(name: &str, resource: &str, count: u32) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  uid: uid-{name}\n\
         spec:\n  containers:\n  - name: app\n    image: app\n    resources:\n      requests: {{cpu: 100m, '{resource}': '{count}'}}\n      limits: {{'{resource}': '{count}'}}\n---\n"
    )
}

fn claims(r: &simulate::Report) -> Vec<Value> {
    r.plugins
        .get("resource_claims")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn placed(r: &simulate::Report) -> Vec<(String, String)> {
    r.scheduled
        .iter()
        .map(|s| (s.pod.clone(), s.node.clone()))
        .collect()
}

#[test]
fn a_class_with_extended_resource_name_serves_the_pod_through_a_claim() {
    let input = format!(
        "{}{}{}{}",
        node("dra-node", ""),
        dra("dra-node", 2, ""),
        pod("p1", "example.com/fpga", 2),
        pod("p2", "example.com/fpga", 1)
    );
    let r = run(&input);
    assert_eq!(placed(&r), [("p1".to_string(), "dra-node".to_string())]);
    let c = claims(&r);
    assert_eq!(c.len(), 1, "{c:?}");
    assert!(
        c[0]["name"]
            .as_str()
            .unwrap()
            .starts_with("p1-extended-resources-"),
        "{c:?}"
    );
    assert_eq!(c[0]["reservedFor"], serde_json::json!(["p1"]));
    let devices: Vec<(&str, &str)> = c[0]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["request"].as_str().unwrap(),
                d["device"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        devices,
        [
            ("container-0-request-1", "fpga.example.com/dra-node/fpga-0"),
            ("container-0-request-1", "fpga.example.com/dra-node/fpga-1"),
        ]
    );
    // Both devices are taken: the second pod waits, told so by
    // DynamicResources (not as an Insufficient node resource).
    assert_eq!(r.unschedulable.len(), 1);
    let why = format!("{:?}", r.unschedulable[0]);
    assert!(why.contains("cannot allocate all claims"), "{why}");
    assert!(!why.contains("Insufficient example.com/fpga"), "{why}");
}

#[test]
fn the_implicit_class_name_is_served_too() {
    let input = format!(
        "{}{}{}",
        node("dra-node", ""),
        dra("dra-node", 1, ""),
        pod("p1", "deviceclass.resource.kubernetes.io/fpga", 1)
    );
    let r = run(&input);
    assert_eq!(placed(&r), [("p1".to_string(), "dra-node".to_string())]);
    let c = claims(&r);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(
        c[0]["devices"][0]["device"],
        "fpga.example.com/dra-node/fpga-0"
    );
}

#[test]
fn a_node_advertising_the_resource_serves_it_by_its_device_plugin() {
    // The only node lists example.com/fpga in allocatable: NodeResourcesFit
    // counts it there, and no claim is made although a class maps it.
    let input = format!(
        "{}{}{}",
        node("dp-node", ", 'example.com/fpga': '4'"),
        dra("elsewhere", 1, ""),
        pod("p1", "example.com/fpga", 2)
    );
    let r = run(&input);
    assert_eq!(placed(&r), [("p1".to_string(), "dp-node".to_string())]);
    assert!(claims(&r).is_empty(), "{:?}", claims(&r));
}

#[test]
fn without_a_class_the_resource_is_a_node_resource() {
    let input = format!("{}{}", node("n", ""), pod("p1", "example.com/fpga", 1));
    let r = run(&input);
    assert!(r.scheduled.is_empty());
    let why = format!("{:?}", r.unschedulable[0]);
    assert!(why.contains("Insufficient example.com/fpga"), "{why}");
}

#[test]
fn devices_with_binding_conditions_are_allocated_with_them_last() {
    // fpga-0 needs its driver's conditions, the other slice's device does
    // not: the device that binds at once is chosen first; with it taken,
    // the one with conditions (the pod binds in `simulate`, where no
    // driver runs).
    let conditions =
        "    bindingConditions: [attached]\n    bindingFailureConditions: [attach-failed]\n";
    let other = "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata:\n  name: dra-node-plain\n\
         spec:\n  driver: fpga.example.com\n  nodeName: dra-node\n  pool:\n    name: plain\n    generation: 1\n    resourceSliceCount: 1\n  devices:\n  - name: plain-0\n---\n";
    let input = format!(
        "{}{}{}{}{}",
        node("dra-node", ""),
        dra("dra-node", 1, conditions),
        other,
        pod("p1", "example.com/fpga", 1),
        pod("p2", "example.com/fpga", 1),
    );
    let r = run(&input);
    assert_eq!(r.scheduled.len(), 2, "{:?}", r.unschedulable);
    let mut devices: Vec<(String, String)> = claims(&r)
        .iter()
        .map(|c| {
            (
                c["reservedFor"][0].as_str().unwrap().to_string(),
                c["devices"][0]["device"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    devices.sort();
    assert_eq!(
        devices,
        [
            (
                "p1".to_string(),
                "fpga.example.com/plain/plain-0".to_string()
            ),
            (
                "p2".to_string(),
                "fpga.example.com/dra-node/fpga-0".to_string()
            ),
        ]
    );
}
