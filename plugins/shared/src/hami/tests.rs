//! Vectors from HAMi's own tests (`pkg/device/devices_test.go`,
//! `pkg/scheduler/scheduler_test.go`,
//! `pkg/device-plugin/nvidiadevice/nvinternal/plugin/util_test.go`,
//! `pkg/device/nvidia/device_test.go`) and a node annotation as HAMi's
//! device plugin writes it on a real node.

use super::node::{encode_register_json, encode_register_legacy};
use super::*;

fn device(id: &str, index: u32, count: u32, devmem: u64, kind: &str, health: bool) -> Device {
    Device {
        id: id.into(),
        index,
        count,
        devmem,
        devcore: 100,
        kind: kind.into(),
        numa: 0,
        mode: "hami-core".into(),
        health,
    }
}

const P4: &str = "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4";

#[test]
fn register_json_from_scheduler_test() {
    let v = r#"[{"id":"GPU-0","count":10,"devmem":8192,"devcore":100,"type":"NVIDIA-A100","numa":0,"health":true,"index":0,"mode":"hami-core"}]"#;
    assert_eq!(
        parse_register(v).unwrap(),
        vec![device("GPU-0", 0, 10, 8192, "NVIDIA-A100", true)]
    );
}

#[test]
fn register_json_omitted_fields_are_zero_and_unhealthy() {
    // TestUnMarshalNodeDevices: no numa (0), a trailing newline; the second
    // device says health false. A device without `health` is unhealthy
    // (omitempty), and one without `mode` is hami-core.
    let v = "[{\"index\":1,\"id\":\"id-1\",\"count\":1,\"devmem\":1024,\"devcore\":10,\"type\":\"type\",\"health\":true},\
             {\"index\":2,\"id\":\"id-2\",\"count\":2,\"devmem\":4096,\"devcore\":20,\"type\":\"type2\",\"health\":false}]\n";
    let d = parse_register(v).unwrap();
    assert_eq!(d.len(), 2);
    assert_eq!(
        (d[0].index, d[0].count, d[0].devmem, d[0].devcore),
        (1, 1, 1024, 10)
    );
    assert_eq!(
        (d[0].numa, d[0].health, d[0].mode.as_str()),
        (0, true, "hami-core")
    );
    assert_eq!((d[1].index, d[1].devmem, d[1].health), (2, 4096, false));
    let no_health = parse_register(r#"[{"id":"g","count":10,"devmem":1,"devcore":100}]"#).unwrap();
    assert!(!no_health[0].health);
}

#[test]
fn register_legacy_seven_and_nine_fields() {
    // Test_DecodeNodeDevices: "str is old format" / "str is new format".
    let old = parse_register(&format!("{P4},10,7680,100,NVIDIA-Tesla P4,0,true:")).unwrap();
    assert_eq!(old, vec![device(P4, 0, 10, 7680, "NVIDIA-Tesla P4", true)]);
    let new = parse_register(&format!(
        "{P4},10,7680,100,NVIDIA-Tesla P4,0,true,1,hami-core:"
    ))
    .unwrap();
    assert_eq!(new, vec![device(P4, 1, 10, 7680, "NVIDIA-Tesla P4", true)]);
    // Test_EncodeNodeDevices writes the 9-field form back.
    assert_eq!(
        encode_register_legacy(&new),
        format!("{P4},10,7680,100,NVIDIA-Tesla P4,0,true,1,hami-core:")
    );
    assert_eq!(
        encode_register_legacy(&old),
        format!("{P4},10,7680,100,NVIDIA-Tesla P4,0,true,0,hami-core:")
    );
}

#[test]
fn register_legacy_two_devices_as_a_node_carries_them() {
    let v = "GPU-61951b89-82be-83fe-3068-2fea68026576,10,7680,100,NVIDIA-Tesla P4,0,true,0,hami-core:\
             GPU-c080157b-3ab1-179d-d6dd-483adab68726,10,8192,100,NVIDIA-Tesla P4,0,true,1,hami-core:";
    let d = parse_register(v).unwrap();
    assert_eq!(d.len(), 2);
    assert_eq!((d[1].index, d[1].devmem), (1, 8192));
    // Both forms carry the same devices.
    assert_eq!(parse_register(&encode_register_json(&d)).unwrap(), d);
}

#[test]
fn register_errors_name_the_annotation_and_cause() {
    let e = |v: &str| parse_register(v).unwrap_err().to_string();
    assert_eq!(
        e("a"),
        "annotation hami.io/node-nvidia-register: missing device separator ':'"
    );
    assert!(e("GPU-a,10,x,100,T4,0,true:").contains("invalid memory \"x\""));
    assert!(e("GPU-a,10,1,100,T4,0,maybe:").contains("invalid health"));
    assert!(e("GPU-a,10,1,100:").contains("has 4 fields, expected 7 or 9"));
    assert!(e(r#"[{"id":"g","count":-1}]"#).contains("count -1 out of range"));
    assert!(e("[]").contains("no devices"));
    assert!(e(r#"[{"id":"g"},{"id":"g"}]"#).contains("listed twice"));
    assert!(e("[{").contains("invalid JSON"));
    // Go's ParseBool spellings are accepted.
    assert!(parse_register("GPU-a,1,1,100,T4,0,T:").unwrap()[0].health);
}

#[test]
fn pair_scores_and_cordon() {
    // TestDecodeNodeDevices (pair scores) and TestCordonedDevices.
    let s = parse_pair_scores(r#"[{"uuid":"GPU-0","score":{"GPU-1":50,"GPU-2":20,"GPU-3":20}}]"#)
        .unwrap();
    assert_eq!(s.between("GPU-0", "GPU-1"), 50);
    assert_eq!(s.between("GPU-2", "GPU-0"), 20);
    assert_eq!(s.between("GPU-1", "GPU-2"), 0);
    let c = parse_cordon(" a, b ,,c");
    assert_eq!(c.len(), 3);
    assert!(["a", "b", "c"].iter().all(|id| c.contains(*id)));
    assert!(parse_cordon("").is_empty());
    assert!(parse_pair_scores("{").is_err());
}

fn cd(uuid: &str, vendor: &str, mem: u64, cores: u32) -> ContainerDevice {
    ContainerDevice {
        uuid: uuid.into(),
        vendor: vendor.into(),
        mem,
        cores,
    }
}

#[test]
fn pod_devices_two_containers_and_trailing_slot() {
    // Test_DecodePodDevices: "annos having two device".
    let a = "GPU-8dcd427f-483b-b48f-d7e5-75fb19a52b76";
    let v = format!("{a},NVIDIA,500,3:;{P4},NVIDIA,500,3:;");
    let slots = decode_pod_devices(&v, ALLOCATED).unwrap();
    assert_eq!(
        slots,
        vec![
            vec![cd(a, "NVIDIA", 500, 3)],
            vec![cd(P4, "NVIDIA", 500, 3)],
            vec![]
        ]
    );
    // Encoding the two containers gives the same string back.
    assert_eq!(encode_pod_devices(&slots[..2]), v);
}

#[test]
fn pod_devices_coding_from_hami_roundtrips() {
    // TestPodDevicesCoding: one container with two devices; empty pod.
    let two = vec![vec![
        cd("UUID1", "Type1", 1000, 30),
        cd("UUID2", "Type1", 1000, 30),
    ]];
    let s = encode_pod_devices(&two);
    assert_eq!(s, "UUID1,Type1,1000,30:UUID2,Type1,1000,30:;");
    let back = decode_pod_devices(&s, TO_ALLOCATE).unwrap();
    assert_eq!(back, vec![two[0].clone(), vec![]]);
    assert_eq!(encode_pod_devices(&[]), "");
    assert_eq!(decode_pod_devices("", TO_ALLOCATE).unwrap(), vec![vec![]]);
}

#[test]
fn pod_devices_init_container_and_empty_slots() {
    // util_test.go: an init container with a GPU; two init containers
    // without and a regular one with; every container empty.
    let init = decode_pod_devices("GPU-init1,NVIDIA,500,10:;;", TO_ALLOCATE).unwrap();
    assert_eq!(
        init,
        vec![vec![cd("GPU-init1", "NVIDIA", 500, 10)], vec![], vec![]]
    );
    let offset = decode_pod_devices(";;GPU-main1,NVIDIA,2000,50:;", TO_ALLOCATE).unwrap();
    assert_eq!(offset.len(), 4);
    assert!(offset[0].is_empty() && offset[1].is_empty() && offset[3].is_empty());
    assert_eq!(offset[2], vec![cd("GPU-main1", "NVIDIA", 2000, 50)]);
    assert_eq!(
        encode_pod_devices(&offset[..3]),
        ";;GPU-main1,NVIDIA,2000,50:;"
    );
    let none = decode_pod_devices(";;", TO_ALLOCATE).unwrap();
    assert_eq!(none, vec![vec![], vec![], vec![]]);
}

#[test]
fn pod_device_errors() {
    let e = |v: &str| decode_pod_devices(v, ALLOCATED).unwrap_err().to_string();
    assert!(e("GPU-a,NVIDIA,500:;").contains("has 3 fields, expected 4"));
    assert!(e("GPU-a,NVIDIA,-5,3:;").contains("invalid memory"));
    assert!(e(",NVIDIA,5,3:;").contains("missing UUID"));
    assert!(e("GPU-a,NVIDIA,5,x:;").starts_with("annotation hami.io/vgpu-devices-allocated:"));
}

#[test]
fn pod_usage_counts_init_containers_as_hami_does() {
    // One init container on GPU-a (4000 MiB, 50%), two app containers on
    // GPU-a (1000 + 1500 MiB, 30 + 30%) and one on GPU-b.
    let v =
        "GPU-a,NVIDIA,4000,50:;GPU-a,NVIDIA,1000,30:;GPU-a,NVIDIA,1500,30:GPU-b,NVIDIA,700,10:;";
    let u = pod_usage(v, 1).unwrap();
    assert_eq!(
        u,
        vec![
            (
                "GPU-a".to_string(),
                DeviceUse {
                    count: 2,
                    mem: 4000,
                    cores: 60
                }
            ),
            (
                "GPU-b".to_string(),
                DeviceUse {
                    count: 1,
                    mem: 700,
                    cores: 10
                }
            ),
        ]
    );
    // Without init containers every slot adds up.
    let all = pod_usage(v, 0).unwrap();
    assert_eq!(all[0].1.mem, 6500);
    assert_eq!(all[0].1.count, 3);
}

fn res(init: bool, r: &[(&str, i64)]) -> ContainerResources {
    ContainerResources {
        init,
        resources: r.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
    }
}

#[test]
fn requests_with_hami_defaults() {
    let d = Defaults::default();
    let req = |r: &[(&str, i64)]| Request::from_container(&res(false, r), &d);
    // Only a count: the whole device (100%) and, as HAMi's webhook, an
    // exclusive GPU.
    let whole = req(&[(RESOURCE_COUNT, 2)]).unwrap();
    assert_eq!(
        (whole.nums, whole.mem, whole.mem_pct, whole.cores),
        (2, 0, 100, 100)
    );
    assert_eq!(whole.memory_on(8192), 8192);
    // examples/nvidia/example.yaml: 1 GPU, 3000 MiB: shared, no core cap.
    let shared = req(&[(RESOURCE_COUNT, 1), (RESOURCE_MEMORY, 3000)]).unwrap();
    assert_eq!((shared.mem, shared.mem_pct, shared.cores), (3000, 101, 0));
    assert_eq!(shared.memory_on(8192), 3000);
    // use_memory_fraction.yaml: a percentage of the device.
    let pct = req(&[(RESOURCE_COUNT, 1), (RESOURCE_MEMORY_PERCENTAGE, 50)]).unwrap();
    assert_eq!((pct.mem, pct.mem_pct, pct.cores), (0, 50, 0));
    assert_eq!(pct.memory_on(7680), 3840);
    // 100% of memory is exclusive; explicit cores win.
    assert_eq!(
        req(&[(RESOURCE_COUNT, 1), (RESOURCE_MEMORY_PERCENTAGE, 100)])
            .unwrap()
            .cores,
        100
    );
    let cores = req(&[
        (RESOURCE_COUNT, 1),
        (RESOURCE_MEMORY, 500),
        (RESOURCE_CORES, 30),
    ])
    .unwrap();
    assert_eq!(cores.cores, 30);
    assert_eq!(
        req(&[(RESOURCE_COUNT, 1), (RESOURCE_CORES, 150)])
            .unwrap()
            .cores_capped(),
        100
    );
    // No count, or a zero count: no vGPU.
    assert_eq!(req(&[(RESOURCE_MEMORY, 3000)]), None);
    assert_eq!(req(&[(RESOURCE_COUNT, 0)]), None);
    // defaultMemory, defaultCores, webhook default off.
    let d2 = Defaults {
        default_memory: 1000,
        default_cores: 20,
        exclusive_by_default: false,
    };
    let r = Request::from_container(&res(false, &[(RESOURCE_COUNT, 1)]), &d2).unwrap();
    assert_eq!((r.mem, r.mem_pct, r.cores), (1000, 101, 20));
}

#[test]
fn container_resources_roundtrip() {
    let cs = vec![
        res(true, &[]),
        res(false, &[(RESOURCE_COUNT, 1), (RESOURCE_MEMORY, 2000)]),
        res(false, &[]),
    ];
    let s = encode_container_resources(&cs);
    assert_eq!(s, "init:;app:nvidia.com/gpu=1,nvidia.com/gpumem=2000;app:");
    assert_eq!(decode_container_resources(&s).unwrap(), cs);
    assert!(decode_container_resources("side:").is_err());
    assert!(decode_container_resources("app:nvidia.com/gpu").is_err());
    assert!(decode_container_resources("app:nvidia.com/gpu=x").is_err());
}

#[test]
fn node_usage_adds_and_removes_pods() {
    let reg = r#"[{"id":"GPU-0","count":10,"devmem":8192,"devcore":100,"type":"A100","health":true},{"id":"GPU-1","count":10,"devmem":8192,"devcore":100,"type":"A100","index":1,"health":true}]"#;
    let mut n = NodeUsage::from_annotations(reg, Some("GPU-1")).unwrap();
    assert!(n.devices[1].cordoned && !n.devices[0].cordoned);
    let u = pod_usage("GPU-0,NVIDIA,3000,30:;", 0).unwrap();
    n.apply(&u, true);
    assert_eq!(
        (
            n.devices[0].used,
            n.devices[0].free_mem(),
            n.devices[0].free_cores()
        ),
        (1, 5192, 70)
    );
    assert_eq!(n.untouched(), 1);
    n.apply(&u, false);
    assert_eq!(n.untouched(), 2);
}
